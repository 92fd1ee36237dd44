// The one in-use check before a device is stopped without force: the device a queue serves
// (Device::Stop) and one a previous agent left that nothing serves now (a degraded volume's,
// removed by the provisioner) get the same.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "server/ublk/control.h"

namespace blk::server {

// OK when /dev/ublkb<dev_id> is not open; FAILED_PRECONDITION naming its openers otherwise, or
// when the scan cannot see every opener (opener.h). With UBLK_F_SAFE_STOP_DEV in
// `kernel_features` the kernel decides atomically (TRY_STOP): OK means the device is stopped.
absl::Status RefuseStopIfOpen(ControlDevice& control, uint32_t dev_id, uint64_t kernel_features);

}  // namespace blk::server
