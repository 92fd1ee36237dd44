#include "agent/termination_watch.h"

#include <pthread.h>

#include "common/termination_signals.h"

namespace blk::agent {

TerminationWatch::TerminationWatch(const sigset_t& signals)
    : thread_([this, signals] {
        const int signal = WaitForTerminationSignal(signals);
        absl::MutexLock lock(&mutex_);
        if (!stopping_) signal_ = signal;
      }) {}

TerminationWatch::~TerminationWatch() {
  bool signalled = false;
  {
    absl::MutexLock lock(&mutex_);
    signalled = signal_ != 0;
    stopping_ = true;
  }
  // Blocked in every thread, the signal waits for this thread's sigwait, which takes it.
  if (!signalled) ::pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void TerminationWatch::MarkRestored() {
  absl::MutexLock lock(&mutex_);
  restored_ = true;
}

bool TerminationWatch::WaitRestoredOrSignal() {
  absl::MutexLock lock(&mutex_);
  mutex_.Await(absl::Condition(this, &TerminationWatch::RestoredOrSignalledLocked));
  return signal_ == 0;
}

int TerminationWatch::WaitSignal() {
  absl::MutexLock lock(&mutex_);
  mutex_.Await(absl::Condition(this, &TerminationWatch::SignalledLocked));
  return signal_;
}

}  // namespace blk::agent
