#include "agent/volumes/state_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace blk::agent {

absl::StatusOr<StateDirLock> StateDirLock::Acquire(const std::string& state_dir) {
  std::error_code error;
  std::filesystem::create_directories(state_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create state directory ", state_dir, ": ", error.message()));
  }
  const std::string path = absl::StrCat(state_dir, "/lock");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    ::close(fd);
    if (saved == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("another blkagent is already running with state directory ", state_dir));
    }
    return absl::ErrnoToStatus(saved, absl::StrCat("lock ", path));
  }
  return StateDirLock(fd);
}

StateDirLock::~StateDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace blk::agent
