#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace blk::csi {

// The host-side operations blk-csi needs. Mounting and unmounting are
// mount(2)/umount2(2) system calls (no mount binary needed in the container);
// probing and formatting run blkid and mkfs.<type> through fork+exec, as only
// those tools know every file system's on-disk format.
// What blkid finds on a device: a superblock (a file system, or another user's such as
// LVM2_member or crypto_LUKS), a partition table, or signatures it cannot tell apart.
struct DeviceContents {
  std::string type;             // blkid's TYPE, "" for none
  std::string partition_table;  // blkid's PTTYPE ("dos", "gpt"), "" for none
  bool ambivalent = false;      // several signatures (blkid's exit status 8)

  bool empty() const { return type.empty() && partition_table.empty() && !ambivalent; }
  // For messages: "ext4", "a dos partition table", "several signatures".
  std::string Describe() const;
};

class Mounter {
 public:
  // Probes `device` itself (blkid -p: superblocks and partition tables, no cache).
  absl::StatusOr<DeviceContents> Probe(const std::string& device) const;

  // mkfs.<fs_type> on `device` (ext4 or xfs).
  absl::Status MakeFilesystem(const std::string& device, const std::string& fs_type) const;

  // Mounts `device`'s `fs_type` at `target` (a directory, created when
  // missing) with the options in `flags` ("noatime", "ro", file-system
  // specific ones passed through as data).
  absl::Status Mount(const std::string& device, const std::string& target,
                     const std::string& fs_type, const std::vector<std::string>& flags) const;

  // Bind-mounts `source` onto `target` (an existing directory or file), then
  // remounts the bind read-only when asked.
  absl::Status BindMount(const std::string& source, const std::string& target,
                         bool read_only) const;

  // Grows the `fs_type` file system on `device`, mounted at `mount_path`, to fill the device:
  // resize2fs for ext4 (the device), xfs_growfs for xfs (the mount point). Online: the file
  // system stays mounted.
  absl::Status GrowFilesystem(const std::string& device, const std::string& mount_path,
                              const std::string& fs_type) const;

  // Unmounts `target`; one that is not mounted (or does not exist) is fine.
  absl::Status Unmount(const std::string& target) const;

  // Whether a mount sits exactly at `path`.
  absl::StatusOr<bool> IsMountPoint(const std::string& path) const;

  // Where `device` is in use through the mount table: mount points of its
  // file system (the staging mount and its binds), and of binds of its device
  // node (on whatever file system holds it). `except` is left out.
  absl::StatusOr<std::vector<std::string>> MountsOf(const std::string& device,
                                                    const std::string& except) const;
};

}  // namespace blk::csi
