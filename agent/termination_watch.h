// The agent's termination signal (SIGTERM, SIGINT; blocked in every thread by
// BlockTerminationSignals), read from a signalfd by a thread of its own so that the main thread
// can wait for it and for the end of the start-up restore at once: a signal during a long restore
// is acted on without waiting for the restore to finish.
#pragma once

#include <signal.h>

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"

namespace blk::agent {

class TerminationWatch {
 public:
  explicit TerminationWatch(const sigset_t& signals);
  // Ends the watching thread if no signal came (a signal arriving later stays pending).
  ~TerminationWatch();
  TerminationWatch(const TerminationWatch&) = delete;
  TerminationWatch& operator=(const TerminationWatch&) = delete;

  // Called by the restore when it ended.
  void MarkRestored() ABSL_LOCKS_EXCLUDED(mutex_);
  // Blocks until the restore ended (true) or a signal came first (false).
  bool WaitRestoredOrSignal() ABSL_LOCKS_EXCLUDED(mutex_);
  // Blocks until a signal came; returns it.
  int WaitSignal() ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  bool RestoredOrSignalledLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return restored_ || signal_ != 0;
  }
  bool SignalledLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return signal_ != 0; }

  absl::Mutex mutex_;
  bool restored_ ABSL_GUARDED_BY(mutex_) = false;
  int signal_ ABSL_GUARDED_BY(mutex_) = 0;
  const UniqueFd signal_fd_;
  const UniqueFd stop_fd_;  // an eventfd the destructor writes to end the thread
  std::thread thread_;
};

}  // namespace blk::agent
