#include "agent/api/call_queue.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace blk::agent {

CallQueue::CallQueue(int workers, size_t max_waiting) : max_waiting_(max_waiting) {
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { Work(); });
}

CallQueue::~CallQueue() {
  Close();
  for (std::thread& worker : workers_) worker.join();
}

void CallQueue::Open() {
  absl::MutexLock lock(&mutex_);
  open_ = true;
}

void CallQueue::Close() {
  std::deque<Waiting> refused;
  {
    absl::MutexLock lock(&mutex_);
    closed_ = true;
    refused.swap(waiting_);
  }
  for (Waiting& waiting : refused) {
    waiting.call.refuse(absl::UnavailableError("blkagent is stopping"));
  }
}

size_t CallQueue::waiting() const {
  absl::MutexLock lock(&mutex_);
  return waiting_.size();
}

std::vector<CallQueue::Waiting> CallQueue::TakeAbandonedLocked() {
  std::vector<Waiting> abandoned;
  const Clock::time_point now = Clock::now();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->call.deadline <= now || it->call.cancelled()) {
      abandoned.push_back(std::move(*it));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  return abandoned;
}

void CallQueue::Submit(Call call) {
  absl::Status refusal;
  std::optional<Call> refused;  // `call`, when it is not queued
  std::vector<Waiting> abandoned;
  {
    absl::MutexLock lock(&mutex_);
    if (closed_) {
      refusal = absl::UnavailableError("blkagent is stopping");
      refused.emplace(std::move(call));
    } else {
      // Callers that gave up hold no place in the queue.
      if (waiting_.size() >= max_waiting_) abandoned = TakeAbandonedLocked();
      if (waiting_.size() >= max_waiting_) {
        refusal = absl::ResourceExhaustedError(
            absl::StrCat("blkagent is busy: ", waiting_.size(),
                         " calls already wait for a worker, the most it queues "
                         "(--max-waiting-calls ",
                         max_waiting_, "); retry later"));
        refused.emplace(std::move(call));
      } else {
        if (!open_) {
          spdlog::debug("{}: waits until the volumes are reconciled", call.method);
        } else if (!waiting_.empty() || running_ == workers_.size()) {
          spdlog::debug("{}: waits for a worker ({} running, {} waiting before it)", call.method,
                        running_, waiting_.size());
        }
        waiting_.push_back({std::move(call), std::chrono::steady_clock::now()});
      }
    }
  }
  for (Waiting& gone : abandoned) Answer(gone);
  if (refused.has_value()) {
    spdlog::warn("{}: refused: {}", refused->method, refusal.ToString());
    refused->refuse(refusal);
  }
}

void CallQueue::Answer(Waiting& waiting) {
  Call& call = waiting.call;
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - waiting.since);
  if (call.deadline <= Clock::now()) {
    spdlog::info("{}: not run: the caller's deadline passed while it waited {} ms for a worker",
                 call.method, waited.count());
    call.refuse(absl::DeadlineExceededError(
        absl::StrCat("deadline passed while waiting ", waited.count(), " ms for a worker")));
  } else if (call.cancelled()) {
    spdlog::info("{}: not run: the caller cancelled it while it waited {} ms for a worker",
                 call.method, waited.count());
    call.refuse(absl::CancelledError("cancelled while waiting for a worker"));
  } else {
    call.run();
  }
}

void CallQueue::Work() {
  for (;;) {
    Waiting next;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(this, &CallQueue::ReadyLocked));
      if (waiting_.empty()) return;  // closed
      next = std::move(waiting_.front());
      waiting_.pop_front();
      ++running_;
    }
    Answer(next);
    absl::MutexLock lock(&mutex_);
    --running_;
  }
}

}  // namespace blk::agent
