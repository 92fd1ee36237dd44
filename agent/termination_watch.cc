#include "agent/termination_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace blk::agent {
namespace {

// The next of `signals` (blocked, so a signalfd receives them), or 0 once `stop` is written.
int NextSignalOrStop(const UniqueFd& signal_fd, const UniqueFd& stop) {
  pollfd fds[2] = {{signal_fd.get(), POLLIN, 0}, {stop.get(), POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 0;
    }
    if (fds[1].revents != 0) return 0;
    signalfd_siginfo info{};
    if (::read(signal_fd.get(), &info, sizeof(info)) == sizeof(info)) {
      return static_cast<int>(info.ssi_signo);
    }
  }
}

}  // namespace

TerminationWatch::TerminationWatch(const sigset_t& signals)
    : signal_fd_(::signalfd(-1, &signals, SFD_CLOEXEC)),
      stop_fd_(::eventfd(0, EFD_CLOEXEC)),
      thread_([this] {
        const int signal = NextSignalOrStop(signal_fd_, stop_fd_);
        absl::MutexLock lock(&mutex_);
        signal_ = signal;
      }) {}

TerminationWatch::~TerminationWatch() {
  const uint64_t one = 1;
  // Fails only without a valid eventfd, and then the thread's poll failed and it has ended.
  [[maybe_unused]] const ssize_t written = ::write(stop_fd_.get(), &one, sizeof(one));
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
