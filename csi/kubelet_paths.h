#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace blk::csi {

// The staging and target paths the CO sends are confined to the kubelet's root directory
// (--kubelet-root): absolute, free of "." and ".." components, strictly below the root, and
// never reached through a symbolic link, so that a request cannot make blk-csi (root) create,
// mount over or remove anything elsewhere on the node. Every component below the root is
// opened with openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH) from the one above it; the root
// itself is resolved as configured (it may be a symlink on some distributions).
class KubeletPaths {
 public:
  explicit KubeletPaths(std::string root);

  const std::string& root() const { return root_; }

  // INVALID_ARGUMENT naming `field` unless `path` is absolute, normal and below the root.
  absl::Status Check(const std::string& path, const char* field) const;

  // Creates `path` as a directory (or, with `as_file`, an empty file), and the directories
  // missing above it (mode 0750); what exists already is fine. FAILED_PRECONDITION when a
  // component is a symbolic link or (above the last) not a directory.
  absl::Status Create(const std::string& path, bool as_file) const;

  // Removes `path` (a file or an empty directory) itself, whatever it is, never what a
  // symbolic link on the way points to. A path that does not exist is fine.
  absl::Status Remove(const std::string& path) const;

  // An O_PATH descriptor of `path` (which must exist) reached without symbolic links.
  absl::StatusOr<UniqueFd> Open(const std::string& path) const;

 private:
  // The parent directory of `path` (created when `create`) as an O_PATH descriptor, and the
  // last component's name in `leaf`.
  absl::StatusOr<UniqueFd> OpenParent(const std::string& path, bool create,
                                      std::string* leaf) const;

  std::string root_;
};

}  // namespace blk::csi
