// The decisions about what a device asks of the kernel, kept apart from the syscalls so they are
// testable on a machine without ublk.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "server/device_config.h"
#include "server/ublk_abi.h"

namespace blk::server {

// Checks the parts of a config the kernel would reject with a bare EINVAL, naming the field.
absl::Status ValidateDeviceConfig(const DeviceConfig& config);

// The one place that decides the UBLK_F_* flags of ADD_DEV from what the kernel offers and what the
// device wants.
uint64_t ChooseDeviceFlags(uint64_t kernel_features, const DeviceConfig& config);

// ADD_DEV's dev_info: the kernel picks the id.
abi::CtrlDevInfo BuildDevInfo(const DeviceConfig& config, uint64_t flags);

// SET_PARAMS content: geometry, read-only, a volatile cache (so FLUSH arrives), FUA, and discard /
// write-zeroes limits (so DISCARD and WRITE_ZEROES arrive).
abi::Params BuildParams(const DeviceConfig& config, uint32_t max_io_buf_bytes);

}  // namespace blk::server
