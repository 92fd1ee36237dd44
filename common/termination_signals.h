// SIGTERM and SIGINT for a daemon with threads: blocked in the main thread before any other thread
// exists (so every thread inherits the mask and none is interrupted by them), then taken
// synchronously where the daemon decides to stop.
#pragma once

#include <signal.h>

namespace blk {

// Blocks SIGTERM and SIGINT and ignores SIGPIPE (a peer that went away is an error return);
// returns the blocked set for WaitForTerminationSignal.
inline sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

// The next of `signals` to arrive.
inline int WaitForTerminationSignal(const sigset_t& signals) {
  int signal = 0;
  while (sigwait(&signals, &signal) != 0) {
  }
  return signal;
}

}  // namespace blk
