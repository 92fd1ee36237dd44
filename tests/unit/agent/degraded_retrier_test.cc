#include "agent/volumes/degraded_retrier.h"

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::agent {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;

TEST(DegradedRetrierTest, TheBackoffDoublesUpToTheMaximumAndStartsOverAfterForget) {
  DegradedRetrier retrier([](const std::string&) { return DegradedRetrier::Attempt::kHandled; },
                          milliseconds(100), milliseconds(350));
  EXPECT_EQ(retrier.Schedule("a"), milliseconds(100));
  EXPECT_EQ(retrier.Schedule("a"), milliseconds(200));
  EXPECT_EQ(retrier.Schedule("a"), milliseconds(350));
  EXPECT_EQ(retrier.Schedule("a"), milliseconds(350));
  EXPECT_EQ(retrier.Schedule("b"), milliseconds(100));
  retrier.Forget("a");
  EXPECT_EQ(retrier.Schedule("a"), milliseconds(100));
}

// The attempts, and a way to wait for the n-th.
class Attempts {
 public:
  void Record(const std::string& id) {
    absl::MutexLock lock(&mutex_);
    ids_.push_back(id);
  }
  std::vector<std::string> WaitFor(size_t n) {
    absl::MutexLock lock(&mutex_);
    want_ = n;
    mutex_.Await(absl::Condition(this, &Attempts::EnoughLocked));
    return ids_;
  }

 private:
  bool EnoughLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return ids_.size() >= want_; }

  absl::Mutex mutex_;
  std::vector<std::string> ids_ ABSL_GUARDED_BY(mutex_);
  size_t want_ ABSL_GUARDED_BY(mutex_) = 0;
};

TEST(DegradedRetrierTest, AScheduledVolumeIsRetriedUntilItIsHandled) {
  Attempts attempts;
  int busy_left = 2;
  DegradedRetrier retrier([&](const std::string& id) {
    attempts.Record(id);
    // The first attempts find the volume held by another operation: retried after its backoff.
    return busy_left-- > 0 ? DegradedRetrier::Attempt::kBusy : DegradedRetrier::Attempt::kHandled;
  });
  retrier.Start(milliseconds(1), milliseconds(2));
  retrier.Schedule("a");
  EXPECT_THAT(attempts.WaitFor(3), ElementsAre("a", "a", "a"));
  retrier.Stop();
  EXPECT_THAT(attempts.WaitFor(3), ElementsAre("a", "a", "a"));
}

TEST(DegradedRetrierTest, StopWaitsForTheRetryInProgressAndStartsNoOther) {
  std::promise<void> entered;
  bool finished = false;
  DegradedRetrier* self = nullptr;
  DegradedRetrier retrier([&](const std::string& id) {
    if (id == "a") {
      entered.set_value();
      // Still bringing the volume up when shutdown begins.
      while (!self->stop_requested()) std::this_thread::yield();
      finished = true;
      return DegradedRetrier::Attempt::kHandled;
    }
    ADD_FAILURE() << "volume " << id << " retried after Stop";
    return DegradedRetrier::Attempt::kHandled;
  });
  self = &retrier;
  retrier.Start(milliseconds(1), milliseconds(1));
  retrier.Schedule("a");
  entered.get_future().wait();
  retrier.Schedule("b");  // due at once, but only after "a"'s attempt
  retrier.Stop();
  EXPECT_TRUE(finished);
}

TEST(DegradedRetrierTest, NothingStartsAfterStop) {
  DegradedRetrier retrier([](const std::string& id) {
    ADD_FAILURE() << "volume " << id << " retried after Stop";
    return DegradedRetrier::Attempt::kHandled;
  });
  retrier.Schedule("a");
  retrier.Stop();
  retrier.Start(milliseconds(1), milliseconds(1));
  retrier.Stop();
}

}  // namespace
}  // namespace blk::agent
