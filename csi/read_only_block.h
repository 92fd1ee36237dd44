#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace blk::csi {

// A read-only view of a block device that the kernel enforces, for a raw block publish with
// readonly=true of a volume staged read-write: a read-only loop device over the device. A
// read-only bind of the device node would not do: a mount's read-only flag does not apply to
// the device nodes on it, and marking the device itself read-only (BLKROSET) would refuse the
// writes of every other publish too.
//
// The loop device is LO_FLAGS_READ_ONLY (opened over a read-only descriptor as well), direct
// I/O (no second copy of the data in the page cache), without autoclear: it stays until
// DetachLoop. Its lo_file_name carries kLoopMarker, so that only the loop devices blk-csi
// made are ever detached. A crash between attaching and bind-mounting leaves one unmounted:
// OwnedLoopsOver finds it again through sysfs (/sys/block/loopN/loop/backing_file names
// the device it reads).

// The lo_file_name prefix of blk-csi's loop devices ("blk-csi ro /dev/ublkb0").
inline constexpr char kLoopMarker[] = "blk-csi ro ";

// Attaches a new read-only, direct-I/O loop device over the block device `device`
// (LOOP_CTL_GET_FREE + LOOP_CONFIGURE, retried when another process takes the free one
// first); returns its node, "/dev/loopN".
absl::StatusOr<std::string> AttachReadOnlyLoop(const std::string& device);

// Detaches the loop device `loop_node` (LOOP_CLR_FD); one no longer bound is fine.
absl::Status DetachLoop(const std::string& loop_node);

// The loop devices sysfs shows bound over a backing file: name ("loop3") and the backing
// file's path as the kernel prints it. `sys_block` is /sys/block (a test's tree otherwise).
struct BoundLoop {
  std::string name;
  std::string backing_file;
};
absl::StatusOr<std::vector<BoundLoop>> ListBoundLoops(const std::string& sys_block);

// The name of the loop device a mount's root names ("/loop3" for a bind of /dev/loop3 on
// devtmpfs: "loop3"); "" for any other root.
std::string LoopNameOfMountRoot(absl::string_view root);

// blk-csi's loop devices over the block device `device` (the same device number, whatever
// path the backing file was opened by), as "/dev/loopN" nodes.
absl::StatusOr<std::vector<std::string>> OwnedLoopsOver(
    const std::string& device, const std::string& sys_block = "/sys/block");

}  // namespace blk::csi
