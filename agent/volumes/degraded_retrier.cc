#include "agent/volumes/degraded_retrier.h"

#include <algorithm>
#include <utility>

#include "absl/time/time.h"
#include "spdlog/spdlog.h"

namespace blk::agent {

DegradedRetrier::DegradedRetrier(RetryVolume retry, std::chrono::milliseconds initial_backoff,
                                 std::chrono::milliseconds max_backoff)
    : retry_(std::move(retry)), initial_backoff_(initial_backoff), max_backoff_(max_backoff) {}

DegradedRetrier::~DegradedRetrier() { Stop(); }

void DegradedRetrier::Start(std::chrono::milliseconds initial_backoff,
                            std::chrono::milliseconds max_backoff) {
  absl::MutexLock lock(&mutex_);
  if (started_ || stop_) return;
  started_ = true;
  initial_backoff_ = initial_backoff;
  max_backoff_ = max_backoff;
  thread_ = std::thread([this] { Loop(); });
}

void DegradedRetrier::Stop() {
  {
    absl::MutexLock lock(&mutex_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool DegradedRetrier::stop_requested() const {
  absl::MutexLock lock(&mutex_);
  return stop_;
}

std::chrono::milliseconds DegradedRetrier::Schedule(const std::string& id) {
  absl::MutexLock lock(&mutex_);
  Plan& plan = plans_[id];
  plan.backoff =
      plan.backoff.count() == 0 ? initial_backoff_ : std::min(2 * plan.backoff, max_backoff_);
  plan.next_retry = Clock::now() + plan.backoff;
  plan.in_flight = false;
  woken_ = true;
  return plan.backoff;
}

void DegradedRetrier::Forget(const std::string& id) {
  absl::MutexLock lock(&mutex_);
  plans_.erase(id);
}

void DegradedRetrier::Loop() {
  for (;;) {
    std::vector<std::string> due;
    {
      absl::MutexLock lock(&mutex_);
      if (!WaitForDue(due)) return;
    }
    for (const std::string& id : due) {
      // A shutdown brings nothing more up.
      if (stop_requested()) return;
      spdlog::info("volume {}: retrying", id);
      Finished(id, retry_(id));
    }
  }
}

bool DegradedRetrier::WaitForDue(std::vector<std::string>& due) {
  for (;;) {
    if (stop_) return false;
    const Clock::time_point now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    for (auto& [id, plan] : plans_) {
      if (plan.in_flight) continue;
      if (plan.next_retry <= now) {
        plan.in_flight = true;
        due.push_back(id);
      } else {
        next = std::min(next, plan.next_retry);
      }
    }
    if (!due.empty()) return true;
    const absl::Condition woken(this, &DegradedRetrier::WokenLocked);
    if (next == Clock::time_point::max()) {
      mutex_.Await(woken);
    } else {
      mutex_.AwaitWithTimeout(woken, absl::FromChrono(next - now));
    }
    woken_ = false;
  }
}

void DegradedRetrier::Finished(const std::string& id, Attempt attempt) {
  absl::MutexLock lock(&mutex_);
  auto it = plans_.find(id);
  // Scheduled again or forgotten by the attempt: the plan is already what it should be.
  if (it == plans_.end() || !it->second.in_flight) return;
  it->second.in_flight = false;
  it->second.next_retry = Clock::now() + it->second.backoff;
  if (attempt == Attempt::kBusy) return;
  // Handled without news (no longer degraded, say): nothing to retry.
  plans_.erase(it);
}

}  // namespace blk::agent
