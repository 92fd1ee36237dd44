#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace blk::agent {

// Runs the agent's RPCs on a fixed number of worker threads, in arrival order. A call that finds
// every worker busy waits its turn in a bounded queue instead of being refused; one whose caller
// gave up meanwhile (deadline passed, cancelled) is answered without running, so a create the
// caller no longer waits for never happens behind its back. Only when `max_waiting` calls already
// wait is a new one refused, RESOURCE_EXHAUSTED naming the limit.
//
// The queue starts held: calls wait until Open (the agent reconciles its volumes first).
class CallQueue {
 public:
  using Clock = std::chrono::system_clock;  // gRPC deadlines are system_clock time points
  struct Call {
    std::string method;  // for messages and the log
    Clock::time_point deadline = Clock::time_point::max();
    std::function<bool()> cancelled;  // the caller gave up, or the server is shutting down
    std::function<void()> run;        // runs the handler and answers the caller
    std::function<void(const absl::Status&)> refuse;  // answers the caller without running
  };

  CallQueue(int workers, size_t max_waiting);
  // Close(), then joins the workers once their calls are answered.
  ~CallQueue();
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  // Lets the workers take calls (they are held until then).
  void Open();
  // Answers every waiting call and every later one UNAVAILABLE (the agent is stopping); calls
  // already running finish. Idempotent.
  void Close();
  // Runs `call` on a worker when one is free, answers it now when the queue is full or closed.
  void Submit(Call call);

  size_t waiting() const;

 private:
  struct Waiting {
    Call call;
    std::chrono::steady_clock::time_point since;
  };

  void Work();
  bool ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return closed_ || (open_ && !waiting_.empty());
  }
  // Takes the calls whose callers gave up out of the queue, to be answered without the lock.
  std::vector<Waiting> TakeAbandonedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Runs the call, or refuses it when its caller gave up while it waited.
  static void Answer(Waiting& waiting);

  const size_t max_waiting_;
  mutable absl::Mutex mutex_;
  bool open_ ABSL_GUARDED_BY(mutex_) = false;
  bool closed_ ABSL_GUARDED_BY(mutex_) = false;
  size_t running_ ABSL_GUARDED_BY(mutex_) = 0;
  std::deque<Waiting> waiting_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::thread> workers_;
};

}  // namespace blk::agent
