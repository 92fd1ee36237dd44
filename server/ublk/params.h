// The decisions about what a device asks of the kernel, kept apart from the syscalls so they are
// testable on a machine without ublk.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/backend.h"
#include "server/ublk/abi.h"
#include "server/ublk/device_config.h"

namespace blk::server {

// Checks the parts of a config the kernel would reject with a bare EINVAL, naming the field.
absl::Status ValidateDeviceConfig(const DeviceConfig& config);

// The one place that decides the UBLK_F_* flags of ADD_DEV from what the kernel offers and what the
// device wants. User recovery is asked for whenever offered, so a restarted or killed agent never
// fails an I/O: the device waits for the next agent (REISSUE: requests the old one had taken are
// issued again), or with config.fail_fast fails I/O while no agent serves it. SUPPORT_RQ_AFFINITY
// (config.rq_affinity_flag) only when the operator named its bit and the kernel offers it. Zero
// copy (AUTO_BUF_REG: the kernel registers each request's pages in the queue's ring) when the
// kernel offers it, the storage can use a registered buffer and config.zero_copy allows it; copy
// mode otherwise. BATCH_IO when the kernel offers it (with the ioctl encoding its commands use) and
// config.batch_io allows it; 7.3 accepts it with user recovery and with AUTO_BUF_REG, so neither
// is given up for it.
uint64_t ChooseDeviceFlags(uint64_t kernel_features, const DeviceConfig& config,
                           const StorageTraits& storage = {});

// "zero_copy" or "copy", for the flags a device was created with.
const char* CopyModeName(uint64_t device_flags);

// "batch" (UBLK_F_BATCH_IO) or "classic", for the flags a device was created with.
const char* IoModeName(uint64_t device_flags);

// Whether the kernel completes the device's requests where rq_affinity says rather than on the
// server thread's CPU: only when the operator named SUPPORT_RQ_AFFINITY's bit (`rq_affinity_flag`,
// 0: not named), the kernel offers it and the device has it.
bool RqAffinityRedirected(uint64_t kernel_features, uint64_t device_flags,
                          uint64_t rq_affinity_flag);

// The flag of UBLK_F_* bit `bit` as SUPPORT_RQ_AFFINITY, or InvalidArgument when no flag can be
// that bit: outside 0..63, or a flag of a released kernel (named).
absl::StatusOr<uint64_t> RqAffinityFeatureFlag(int bit);

// The config a recovered device runs with: `asked` (from the volume's spec) with the geometry the
// kernel allocated at ADD_DEV, which its storage and queues must match: `info`'s queue count and
// depth.
DeviceConfig RecoveryConfig(const DeviceConfig& asked, const abi::CtrlDevInfo& info);

// What `recovered` runs with that `asked` said otherwise ("queues 2 (asked 4), ..."); empty when
// they agree.
std::string GeometryDisagreement(const DeviceConfig& asked, const DeviceConfig& recovered);

// ADD_DEV with this id lets the kernel pick one.
inline constexpr uint32_t kAnyDeviceId = 0xffffffffu;

// ADD_DEV's dev_info, asking for `dev_id` (kAnyDeviceId: the kernel picks).
abi::CtrlDevInfo BuildDevInfo(const DeviceConfig& config, uint64_t flags,
                              uint32_t dev_id = kAnyDeviceId);

// SET_PARAMS content: geometry, read-only, a volatile cache (so FLUSH arrives), FUA, and discard /
// write-zeroes limits (so DISCARD and WRITE_ZEROES arrive), each only where the storage has it.
abi::Params BuildParams(const DeviceConfig& config, uint32_t max_io_buf_bytes,
                        const StorageTraits& storage = {});

}  // namespace blk::server
