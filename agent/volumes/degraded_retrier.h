#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace blk::agent {

// Retries DEGRADED volumes in the background, each on its own backoff (the initial backoff,
// doubled after each failure up to the maximum), on one thread it owns.
class DegradedRetrier {
 public:
  enum class Attempt {
    kHandled,  // tried (the volume was scheduled again or forgotten), or no longer degraded
    kBusy,     // another operation holds the volume: try again after the same backoff
  };
  // Brings one degraded volume up; runs on the retry thread, without this object's lock.
  using RetryVolume = std::function<Attempt(const std::string& id)>;

  explicit DegradedRetrier(RetryVolume retry,
                           std::chrono::milliseconds initial_backoff = std::chrono::seconds(1),
                           std::chrono::milliseconds max_backoff = std::chrono::seconds(60));
  ~DegradedRetrier();  // Stop()
  DegradedRetrier(const DegradedRetrier&) = delete;
  DegradedRetrier& operator=(const DegradedRetrier&) = delete;

  // Starts the thread (once; not after Stop) with these backoffs for what is scheduled from now.
  void Start(std::chrono::milliseconds initial_backoff, std::chrono::milliseconds max_backoff);
  // Ends the thread: waits for a retry in progress, and starts none after. Idempotent.
  void Stop();
  bool stop_requested() const;

  // The volume is degraded (again): retry it after its next backoff, which is returned.
  std::chrono::milliseconds Schedule(const std::string& id);
  // The volume came up or is gone: no more retries.
  void Forget(const std::string& id);

 private:
  using Clock = std::chrono::steady_clock;
  struct Plan {
    std::chrono::milliseconds backoff{0};
    Clock::time_point next_retry{};
    bool in_flight = false;
  };

  void Loop();
  // Waits until some volume is due (marking it in flight) or Stop; false on Stop.
  bool WaitForDue(std::vector<std::string>& due) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void Finished(const std::string& id, Attempt attempt) ABSL_LOCKS_EXCLUDED(mutex_);
  bool WokenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return woken_ || stop_; }

  const RetryVolume retry_;
  mutable absl::Mutex mutex_;
  std::chrono::milliseconds initial_backoff_ ABSL_GUARDED_BY(mutex_);
  std::chrono::milliseconds max_backoff_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, Plan> plans_ ABSL_GUARDED_BY(mutex_);
  bool woken_ ABSL_GUARDED_BY(mutex_) = false;  // a plan changed since the thread last looked
  bool stop_ ABSL_GUARDED_BY(mutex_) = false;
  bool started_ ABSL_GUARDED_BY(mutex_) = false;
  // Started under mutex_ by Start; joined by Stop, which only the owner calls.
  std::thread thread_;
};

}  // namespace blk::agent
