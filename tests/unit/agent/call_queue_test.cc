#include "agent/api/call_queue.h"

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What happened to each call: "ran", or the status it was refused with; and a way to wait for
// the n-th outcome.
class Outcomes {
 public:
  void Record(const std::string& name, std::string outcome) {
    absl::MutexLock lock(&mutex_);
    order_.push_back(name);
    outcomes_[name] = std::move(outcome);
  }
  std::vector<std::string> WaitFor(size_t n) {
    absl::MutexLock lock(&mutex_);
    want_ = n;
    mutex_.Await(absl::Condition(this, &Outcomes::EnoughLocked));
    return order_;
  }
  std::string Of(const std::string& name) {
    absl::MutexLock lock(&mutex_);
    auto it = outcomes_.find(name);
    return it == outcomes_.end() ? "" : it->second;
  }

 private:
  bool EnoughLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return order_.size() >= want_; }

  absl::Mutex mutex_;
  size_t want_ ABSL_GUARDED_BY(mutex_) = 0;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, std::string> outcomes_ ABSL_GUARDED_BY(mutex_);
};

class CallQueueTest : public ::testing::Test {
 protected:
  CallQueue::Call MakeCall(
      const std::string& name, std::function<void()> work = [] {}) {
    return CallQueue::Call{
        .method = name,
        .cancelled = [] { return false; },
        .run =
            [this, name, work = std::move(work)] {
              work();
              outcomes_.Record(name, "ran");
            },
        .refuse = [this, name](
                      const absl::Status& status) { outcomes_.Record(name, status.ToString()); }};
  }
  // A call that holds its worker until `gate` opens, announcing on `entered` that it runs.
  CallQueue::Call Blocking(const std::string& name) {
    return MakeCall(name, [this] {
      entered_.set_value();
      gate_.get_future().wait();
    });
  }
  void WaitUntilBlockingRuns() { entered_.get_future().wait(); }
  void OpenGate() { gate_.set_value(); }

  Outcomes outcomes_;
  std::promise<void> entered_;
  std::promise<void> gate_;
};

TEST_F(CallQueueTest, CallsBeyondTheWorkersWaitTheirTurnInArrivalOrder) {
  CallQueue queue(/*workers=*/1, /*max_waiting=*/8);
  queue.Open();
  queue.Submit(Blocking("first"));
  WaitUntilBlockingRuns();
  for (const char* name : {"a", "b", "c"}) queue.Submit(MakeCall(name));
  EXPECT_EQ(queue.waiting(), 3u);
  OpenGate();
  EXPECT_THAT(outcomes_.WaitFor(4), ElementsAre("first", "a", "b", "c"));
  EXPECT_EQ(outcomes_.Of("c"), "ran");
}

TEST_F(CallQueueTest, EveryWorkerRunsACallAtOnce) {
  constexpr int kWorkers = 4;
  CallQueue queue(kWorkers, /*max_waiting=*/8);
  queue.Open();
  // Each call waits until all have started: with fewer workers than calls, none would return.
  std::latch all_running(kWorkers);
  for (int i = 0; i < kWorkers; ++i) {
    queue.Submit(MakeCall("call" + std::to_string(i), [&] { all_running.arrive_and_wait(); }));
  }
  EXPECT_THAT(outcomes_.WaitFor(kWorkers), ::testing::SizeIs(kWorkers));
}

TEST_F(CallQueueTest, AFullQueueRefusesResourceExhaustedNamingTheLimit) {
  CallQueue queue(/*workers=*/1, /*max_waiting=*/2);
  queue.Open();
  queue.Submit(Blocking("first"));
  WaitUntilBlockingRuns();
  queue.Submit(MakeCall("a"));
  queue.Submit(MakeCall("b"));
  queue.Submit(MakeCall("c"));
  EXPECT_THAT(outcomes_.Of("c"), HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(outcomes_.Of("c"), HasSubstr("--max-waiting-calls 2"));
  OpenGate();
  outcomes_.WaitFor(4);
  EXPECT_EQ(outcomes_.Of("a"), "ran");
  EXPECT_EQ(outcomes_.Of("b"), "ran");
}

TEST_F(CallQueueTest, ACallWhoseDeadlinePassedWhileWaitingIsAnsweredWithoutRunning) {
  CallQueue queue(/*workers=*/1, /*max_waiting=*/8);
  queue.Open();
  queue.Submit(Blocking("first"));
  WaitUntilBlockingRuns();
  CallQueue::Call late = MakeCall("late");
  late.deadline = CallQueue::Clock::now() - std::chrono::seconds(1);
  queue.Submit(std::move(late));
  queue.Submit(MakeCall("next"));
  OpenGate();
  EXPECT_THAT(outcomes_.WaitFor(3), ElementsAre("first", "late", "next"));
  EXPECT_THAT(outcomes_.Of("late"), HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_EQ(outcomes_.Of("next"), "ran");
}

TEST_F(CallQueueTest, ACallCancelledWhileWaitingIsAnsweredWithoutRunning) {
  CallQueue queue(/*workers=*/1, /*max_waiting=*/8);
  queue.Open();
  queue.Submit(Blocking("first"));
  WaitUntilBlockingRuns();
  std::atomic<bool> cancelled = false;
  CallQueue::Call gone = MakeCall("gone");
  gone.cancelled = [&] { return cancelled.load(); };
  queue.Submit(std::move(gone));
  cancelled = true;
  OpenGate();
  outcomes_.WaitFor(2);
  EXPECT_THAT(outcomes_.Of("gone"), HasSubstr("CANCELLED"));
}

TEST_F(CallQueueTest, CallersThatGaveUpFreeTheirPlaceInAFullQueue) {
  CallQueue queue(/*workers=*/1, /*max_waiting=*/1);
  queue.Open();
  queue.Submit(Blocking("first"));
  WaitUntilBlockingRuns();
  CallQueue::Call gone = MakeCall("gone");
  gone.cancelled = [] { return true; };
  queue.Submit(std::move(gone));
  queue.Submit(MakeCall("next"));
  EXPECT_THAT(outcomes_.Of("gone"), HasSubstr("CANCELLED"));
  OpenGate();
  outcomes_.WaitFor(3);
  EXPECT_EQ(outcomes_.Of("next"), "ran");
}

TEST_F(CallQueueTest, CallsAreHeldUntilOpen) {
  CallQueue queue(/*workers=*/2, /*max_waiting=*/8);
  queue.Submit(MakeCall("early"));
  EXPECT_EQ(queue.waiting(), 1u);
  EXPECT_EQ(outcomes_.Of("early"), "");
  queue.Open();
  outcomes_.WaitFor(1);
  EXPECT_EQ(outcomes_.Of("early"), "ran");
}

TEST_F(CallQueueTest, CloseAnswersWaitingAndLaterCallsUnavailableAndLetsRunningOnesFinish) {
  CallQueue queue(/*workers=*/1, /*max_waiting=*/8);
  queue.Open();
  queue.Submit(Blocking("first"));
  WaitUntilBlockingRuns();
  queue.Submit(MakeCall("waiting"));
  queue.Close();
  queue.Submit(MakeCall("after"));
  EXPECT_THAT(outcomes_.Of("waiting"), HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(outcomes_.Of("after"), HasSubstr("UNAVAILABLE"));
  OpenGate();
  outcomes_.WaitFor(3);
  EXPECT_EQ(outcomes_.Of("first"), "ran");
}

}  // namespace
}  // namespace blk::agent
