#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace blk::agent {

// An exclusive lock on <state-dir>/lock, held for the agent's lifetime, so two
// agents never manage the same volumes.
class StateDirLock {
 public:
  static absl::StatusOr<StateDirLock> Acquire(const std::string& state_dir);
  StateDirLock(StateDirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  StateDirLock& operator=(StateDirLock&&) = delete;
  ~StateDirLock();

 private:
  explicit StateDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace blk::agent
