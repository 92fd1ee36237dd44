#include "server/ublk/support.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "server/ublk/abi.h"
#include "server/ublk/control.h"

namespace blk::server {
namespace {

// Index = bit number; names are the kernel's UBLK_F_* without the prefix.
constexpr std::array<const char*, abi::kKnownFeatureBits> kFeatureNames = {
    "ZERO_COPY",              // 0
    "COMP_IN_TASK",           // 1
    "NEED_GET_DATA",          // 2
    "USER_RECOVERY",          // 3
    "USER_RECOVERY_REISSUE",  // 4
    "UNPRIVILEGED_DEV",       // 5
    "CMD_IOCTL_ENCODE",       // 6
    "USER_COPY",              // 7
    "ZONED",                  // 8
    "USER_RECOVERY_FAIL_IO",  // 9
    "UPDATE_SIZE",            // 10
    "AUTO_BUF_REG",           // 11
    "QUIESCE",                // 12
    "PER_IO_DAEMON",          // 13
    "BUF_REG_OFF_DAEMON",     // 14
    "BATCH_IO",               // 15
    "INTEGRITY",              // 16
    "SAFE_STOP_DEV",          // 17
    "NO_AUTO_PART_SCAN",      // 18
    "SHMEM_ZC",               // 19
    "IO_DESC_SIZE",           // 20
};

}  // namespace

UblkSupport ProbeUblk() {
  UblkSupport support;
  absl::StatusOr<std::unique_ptr<ControlDevice>> control = ControlDevice::Open();
  if (!control.ok()) {
    support.error = std::string(control.status().message());
    return support;
  }
  support.control_available = true;
  support.features = (*control)->features();
  return support;
}

std::vector<std::string> UblkFeatureNames(uint64_t features) {
  std::vector<std::string> names;
  for (unsigned bit = 0; bit < 64; ++bit) {
    if ((features & (uint64_t{1} << bit)) == 0) continue;
    if (bit < kFeatureNames.size()) {
      names.emplace_back(kFeatureNames[bit]);
    } else {
      names.push_back(absl::StrCat("BIT_", bit));
    }
  }
  return names;
}

}  // namespace blk::server
