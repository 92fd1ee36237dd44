// Who has a block device open: processes (by their fds), stacked devices (holders) and mounts.
// Used to refuse a non-forced stop on kernels without UBLK_F_SAFE_STOP_DEV, and to name the
// opener in the refusal on all kernels.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace blk::server {

struct DeviceNumber {
  unsigned major = 0;
  unsigned minor = 0;
  bool block = true;  // block or character device
};

// Where to look; tests point these at fake trees.
struct OpenerSources {
  std::string proc = "/proc";
  std::string sys_block = "/sys/block";
  std::string mountinfo = "/proc/self/mountinfo";
};

// Mount points whose source is major:minor, from /proc/<pid>/mountinfo text.
std::vector<std::string> MountPointsOf(absl::string_view mountinfo, unsigned major, unsigned minor);

// Human-readable openers: "pid 123 (fio)", "holder dm-0", "mounted at /mnt". Empty: no opener
// found (which, without SAFE_STOP_DEV, is a snapshot: an open can still race a stop).
std::vector<std::string> FindOpeners(const DeviceNumber& device, const std::string& disk_name,
                                     const OpenerSources& sources = {});

}  // namespace blk::server
