// The directories file:// backings may lie in (blkagent --file-dirs).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace blk::agent {

// A file:// volume's path is admitted when its real path (symlinks and ".." resolved) lies under
// the real path of one of the directories. Block devices are file:// paths like any other: list
// /dev (or a directory of device nodes) to admit them. Without directories every path is admitted
// (the agent's behaviour before --file-dirs).
//
// The directories' real paths are taken at every check, so one created, mounted or re-pointed
// after the agent started counts as it is then; one missing admits nothing. The check confines
// what a caller may name; whoever may write inside an admitted directory can still re-point a
// symlink there between the check and the open (keep those directories root's).
class FileDirs {
 public:
  FileDirs() = default;  // every path admitted

  // `dirs` as given to --file-dirs: each absolute. INVALID_ARGUMENT naming `flag` otherwise.
  static absl::StatusOr<FileDirs> Parse(const std::vector<std::string>& dirs,
                                        const std::string& flag);

  bool confined() const { return !dirs_.empty(); }
  const std::vector<std::string>& dirs() const { return dirs_; }

  // OK when `path` (absolute) may back a file:// volume. INVALID_ARGUMENT naming the path, its
  // real path and the directories when it lies elsewhere, or when its real path cannot be told
  // (a symlink to nowhere: opening it would create its target wherever it points).
  absl::Status Admit(const std::string& path) const;

 private:
  explicit FileDirs(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}

  std::vector<std::string> dirs_;
};

}  // namespace blk::agent
