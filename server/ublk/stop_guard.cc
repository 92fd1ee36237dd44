#include "server/ublk/stop_guard.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/ublk/abi.h"
#include "server/ublk/opener.h"

namespace blk::server {
namespace {

// major:minor of the started disk, from sysfs (present with or without udev).
absl::StatusOr<DeviceNumber> DiskNumber(uint32_t dev_id) {
  const std::string path = absl::StrCat("/sys/block/ublkb", dev_id, "/dev");
  std::ifstream in(path);
  unsigned major = 0;
  unsigned minor = 0;
  char colon = 0;
  if (!(in >> major >> colon >> minor) || colon != ':') {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  return DeviceNumber{major, minor, /*block=*/true};
}

}  // namespace

absl::Status RefuseStopIfOpen(ControlDevice& control, uint32_t dev_id, uint64_t kernel_features) {
  const std::string disk = absl::StrCat("ublkb", dev_id);
  absl::StatusOr<DeviceNumber> number = DiskNumber(dev_id);
  Openers openers;
  if (number.ok()) openers = FindOpeners(*number, disk);
  std::vector<std::string>& found = openers.found;

  if (kernel_features & abi::kFSafeStopDev) {
    // The kernel decides atomically: stopped now, or EBUSY and untouched.
    absl::Status tried = control.TryStopDev(dev_id);
    if (tried.ok()) return absl::OkStatus();
    if (tried.code() != absl::StatusCode::kFailedPrecondition) return tried;
    if (found.empty()) found.push_back("an opener the scan did not find (kernel says busy)");
  } else if (found.empty() && !openers.blind_spot.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot tell whether /dev/", disk,
                                                      " is in use: ", openers.blind_spot,
                                                      "; stop it with force"));
  }
  if (found.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "/dev/", disk, " is in use (", absl::StrJoin(found, ", "), "); stop it with force"));
}

}  // namespace blk::server
