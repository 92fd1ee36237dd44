#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace blk::csi {

// One line of /proc/self/mountinfo (proc(5)), octal escapes decoded.
struct MountEntry {
  std::string major_minor;  // the mounted file system's device, "259:0"
  std::string root;         // what of that file system is mounted: "/", or "/ublkb0" for a bind
  std::string mount_point;
  std::string fs_type;
  std::string source;
  bool read_only = false;  // the mount's own options (not the super block's)
};

// Parses mountinfo text; INTERNAL on a line that does not have its fields.
absl::StatusOr<std::vector<MountEntry>> ParseMountInfo(absl::string_view text);

// Reads and parses /proc/self/mountinfo.
absl::StatusOr<std::vector<MountEntry>> ReadMountTable();

}  // namespace blk::csi
