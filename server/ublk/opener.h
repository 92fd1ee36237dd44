// Who has a block device open: processes (by their fds), stacked devices (holders) and mounts in
// every mount namespace a process is in. Used to refuse a non-forced stop on kernels without
// UBLK_F_SAFE_STOP_DEV, and to name the opener in the refusal on all kernels. Seeing every process
// takes the host's PID namespace (hostPID in Kubernetes): elsewhere the scan says it is blind.
#pragma once

#include <sys/types.h>

#include <cstdint>
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
  // The inode of the host's PID namespace (PROC_PID_INIT_INO, fixed by the kernel's ABI).
  uint64_t host_pid_namespace_inode = 0xEFFFFFFCU;
};

struct Openers {
  // Human-readable: "pid 123 (fio)", "holder dm-0", "mounted at /mnt", "mounted at /mnt in the
  // mount namespace of pid 9 (sleep)". Empty: none found, which without SAFE_STOP_DEV is a
  // snapshot (an open can still race a stop).
  std::vector<std::string> found;
  // Why the scan cannot see every opener; empty when it can.
  std::string blind_spot;
};

// Mount points whose source is major:minor, from /proc/<pid>/mountinfo text.
std::vector<std::string> MountPointsOf(absl::string_view mountinfo, unsigned major, unsigned minor);

Openers FindOpeners(const DeviceNumber& device, const std::string& disk_name,
                    const OpenerSources& sources = {});

}  // namespace blk::server
