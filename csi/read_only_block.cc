#include "csi/read_only_block.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/unique_fd.h"

namespace blk::csi {
namespace {

using blk::UniqueFd;

// Another process may take the free loop device between LOOP_CTL_GET_FREE and
// LOOP_CONFIGURE (EBUSY); the next free one is asked for then.
constexpr int kConfigureAttempts = 8;

std::string LoopNode(int index) { return absl::StrCat("/dev/loop", index); }

// One loop device configured over `backing` (an O_RDONLY descriptor of `device`).
absl::StatusOr<std::string> ConfigureFreeLoop(const UniqueFd& control, const UniqueFd& backing,
                                              const std::string& device, uint32_t block_size,
                                              int& busy_index) {
  const int index = ::ioctl(control.get(), LOOP_CTL_GET_FREE);
  if (index < 0) return absl::ErrnoToStatus(errno, "LOOP_CTL_GET_FREE on /dev/loop-control");
  const std::string node = LoopNode(index);
  UniqueFd loop(::open(node.c_str(), O_RDWR | O_CLOEXEC));
  if (!loop.valid()) return absl::ErrnoToStatus(errno, absl::StrCat("open ", node));
  struct loop_config config;
  std::memset(&config, 0, sizeof(config));
  config.fd = static_cast<uint32_t>(backing.get());
  // The device's own logical block size: direct I/O needs the loop's to be at least that.
  config.block_size = block_size;
  config.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_DIRECT_IO;
  const std::string marker = absl::StrCat(kLoopMarker, device);
  std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), marker.c_str(), LO_NAME_SIZE - 1);
  if (::ioctl(loop.get(), LOOP_CONFIGURE, &config) != 0) {
    const int err = errno;
    if (err == EBUSY) busy_index = index;
    return absl::ErrnoToStatus(err, absl::StrCat("LOOP_CONFIGURE ", node, " over ", device));
  }
  return node;
}

// Whether the loop device `node` is one blk-csi attached (its lo_file_name carries kLoopMarker).
absl::StatusOr<bool> IsOwnedLoop(const std::string& node) {
  UniqueFd loop(::open(node.c_str(), O_RDONLY | O_CLOEXEC));
  if (!loop.valid()) return absl::ErrnoToStatus(errno, absl::StrCat("open ", node));
  struct loop_info64 info;
  std::memset(&info, 0, sizeof(info));
  if (::ioctl(loop.get(), LOOP_GET_STATUS64, &info) != 0) {
    if (errno == ENXIO) return false;  // detached meanwhile
    return absl::ErrnoToStatus(errno, absl::StrCat("LOOP_GET_STATUS64 ", node));
  }
  info.lo_file_name[LO_NAME_SIZE - 1] = 0;
  return absl::StartsWith(reinterpret_cast<const char*>(info.lo_file_name), kLoopMarker);
}

}  // namespace

absl::StatusOr<std::string> AttachReadOnlyLoop(const std::string& device) {
  UniqueFd backing(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (!backing.valid()) return absl::ErrnoToStatus(errno, absl::StrCat("open ", device));
  int block_size = 0;
  if (::ioctl(backing.get(), BLKSSZGET, &block_size) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("BLKSSZGET ", device));
  }
  UniqueFd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control.valid()) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::FailedPreconditionError(
          "no /dev/loop-control: a read-only raw block publish needs loop devices (modprobe "
          "loop)");
    }
    return absl::ErrnoToStatus(err, "open /dev/loop-control");
  }
  absl::Status last;
  for (int attempt = 0; attempt < kConfigureAttempts; ++attempt) {
    int busy_index = -1;
    absl::StatusOr<std::string> node =
        ConfigureFreeLoop(control, backing, device, static_cast<uint32_t>(block_size), busy_index);
    if (node.ok() || busy_index < 0) return node;
    last = node.status();
  }
  return absl::UnavailableError(absl::StrCat("no free loop device for a read-only view of ", device,
                                             " after ", kConfigureAttempts,
                                             " attempts: ", last.message()));
}

absl::Status DetachLoop(const std::string& loop_node) {
  UniqueFd loop(::open(loop_node.c_str(), O_RDONLY | O_CLOEXEC));
  if (!loop.valid()) {
    if (errno == ENOENT) return absl::OkStatus();  // the loop device itself is gone
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", loop_node));
  }
  if (::ioctl(loop.get(), LOOP_CLR_FD, 0) != 0 && errno != ENXIO) {
    return absl::ErrnoToStatus(errno, absl::StrCat("LOOP_CLR_FD ", loop_node));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BoundLoop>> ListBoundLoops(const std::string& sys_block) {
  std::vector<BoundLoop> loops;
  std::error_code error;
  std::filesystem::directory_iterator it(sys_block, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot list ", sys_block, ": ", error.message()));
  }
  for (const std::filesystem::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "loop")) continue;
    // Only a bound loop device has a backing_file.
    std::ifstream file(entry.path() / "loop" / "backing_file");
    if (!file) continue;
    std::string backing;
    std::getline(file, backing);
    if (backing.empty()) continue;
    loops.push_back({name, backing});
  }
  return loops;
}

std::string LoopNameOfMountRoot(absl::string_view root) {
  absl::string_view name = root;
  if (!absl::ConsumePrefix(&name, "/loop") || name.empty()) return "";
  for (const char c : name) {
    if (c < '0' || c > '9') return "";
  }
  return std::string(absl::StripPrefix(root, "/"));
}

absl::StatusOr<std::vector<std::string>> OwnedLoopsOver(const std::string& device,
                                                        const std::string& sys_block) {
  struct stat device_stat;
  if (::stat(device.c_str(), &device_stat) != 0) return absl::ErrnoToStatus(errno, device);
  absl::StatusOr<std::vector<BoundLoop>> bound = ListBoundLoops(sys_block);
  if (!bound.ok()) return bound.status();
  std::vector<std::string> owned;
  for (const BoundLoop& loop : *bound) {
    struct stat backing_stat;
    // A backing file that is not there any more (" (deleted)") is not this device.
    if (::stat(loop.backing_file.c_str(), &backing_stat) != 0) continue;
    if (!S_ISBLK(backing_stat.st_mode) || backing_stat.st_rdev != device_stat.st_rdev) continue;
    const std::string node = absl::StrCat("/dev/", loop.name);
    absl::StatusOr<bool> ours = IsOwnedLoop(node);
    if (!ours.ok()) return ours.status();
    if (*ours) owned.push_back(node);
  }
  return owned;
}

}  // namespace blk::csi
