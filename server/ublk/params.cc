#include "server/ublk/params.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/ublk/abi.h"
#include "server/ublk/support.h"

namespace blk::server {
namespace {

constexpr uint32_t kPhysicalBlockShift = 12;
// DISCARD and WRITE_ZEROES carry no data, so they are not bound by the I/O buffer size.
constexpr uint32_t kMaxDiscardSectors = (1U << 30) >> abi::kSectorShift;

}  // namespace

absl::Status ValidateDeviceConfig(const DeviceConfig& config) {
  if (config.logical_block_size != 512 && config.logical_block_size != 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("logical_block_size must be 512 or 4096, got ", config.logical_block_size));
  }
  if (config.size_bytes == 0 || config.size_bytes % config.logical_block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("size_bytes must be a positive multiple of the logical block size ",
                     config.logical_block_size, ", got ", config.size_bytes));
  }
  if (config.queues == 0 || config.queues > abi::kMaxQueues) {
    return absl::InvalidArgumentError(
        absl::StrCat("queues must be 1..", abi::kMaxQueues, ", got ", config.queues));
  }
  if (config.queue_depth == 0 || config.queue_depth > abi::kMaxQueueDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue_depth must be 1..", abi::kMaxQueueDepth, ", got ", config.queue_depth));
  }
  if (config.max_io_bytes < 4096 || config.max_io_bytes % 4096 != 0 ||
      config.max_io_bytes > (32U << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_io_bytes must be a multiple of 4096 in 4096..32MiB, got ", config.max_io_bytes));
  }
  return absl::OkStatus();
}

uint64_t ChooseDeviceFlags(uint64_t kernel_features, const DeviceConfig& config,
                           const StorageTraits& storage) {
  // Copy mode with one thread per queue needs no optional feature. The ioctl encoding is asked
  // for whenever offered: newer kernels may be built without the legacy opcodes.
  uint64_t flags = kernel_features & (abi::kFCmdIoctlEncode | config.rq_affinity_flag);
  if (config.zero_copy && storage.zero_copy) flags |= kernel_features & abi::kFAutoBufReg;
  // The batch commands exist only in the ioctl encoding (every kernel with BATCH_IO has it).
  if (config.batch_io && (kernel_features & abi::kFCmdIoctlEncode) != 0) {
    flags |= kernel_features & abi::kFBatchIo;
  }
  if ((kernel_features & abi::kFUserRecovery) == 0) return flags;
  // The kernel accepts RECOVERY alone, or with exactly one of REISSUE and FAIL_IO.
  if (config.fail_fast) {
    if (kernel_features & abi::kFUserRecoveryFailIo) {
      flags |= abi::kFUserRecovery | abi::kFUserRecoveryFailIo;
    }
    return flags;
  }
  flags |= abi::kFUserRecovery;
  if (kernel_features & abi::kFUserRecoveryReissue) flags |= abi::kFUserRecoveryReissue;
  return flags;
}

bool RqAffinityRedirected(uint64_t kernel_features, uint64_t device_flags,
                          uint64_t rq_affinity_flag) {
  return (kernel_features & device_flags & rq_affinity_flag) != 0;
}

absl::StatusOr<uint64_t> RqAffinityFeatureFlag(int bit) {
  if (bit < 0 || bit > 63) {
    return absl::InvalidArgumentError(
        absl::StrCat("the SUPPORT_RQ_AFFINITY feature bit must be 0..63, got ", bit));
  }
  const uint64_t flag = uint64_t{1} << bit;
  if ((flag & abi::kFKnownFeatures) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the SUPPORT_RQ_AFFINITY feature bit ", bit,
                                                   " is UBLK_F_", UblkFeatureNames(flag).front(),
                                                   " of released kernels, not a free bit"));
  }
  return flag;
}

const char* CopyModeName(uint64_t device_flags) {
  return (device_flags & abi::kFAutoBufReg) != 0 ? "zero_copy" : "copy";
}

const char* IoModeName(uint64_t device_flags) {
  return (device_flags & abi::kFBatchIo) != 0 ? "batch" : "classic";
}

DeviceConfig RecoveryConfig(const DeviceConfig& asked, const abi::CtrlDevInfo& info) {
  DeviceConfig config = asked;
  config.queues = info.nr_hw_queues;
  config.queue_depth = info.queue_depth;
  return config;
}

std::string GeometryDisagreement(const DeviceConfig& asked, const DeviceConfig& recovered) {
  std::vector<std::string> differences;
  if (recovered.queues != asked.queues) {
    differences.push_back(absl::StrCat("queues ", recovered.queues, " (asked ", asked.queues, ")"));
  }
  if (recovered.queue_depth != asked.queue_depth) {
    differences.push_back(
        absl::StrCat("queue depth ", recovered.queue_depth, " (asked ", asked.queue_depth, ")"));
  }
  return absl::StrJoin(differences, ", ");
}

abi::CtrlDevInfo BuildDevInfo(const DeviceConfig& config, uint64_t flags, uint32_t dev_id) {
  abi::CtrlDevInfo info{};
  info.nr_hw_queues = config.queues;
  info.queue_depth = config.queue_depth;
  info.max_io_buf_bytes = config.max_io_bytes;
  info.dev_id = dev_id;
  info.ublksrv_pid = -1;
  info.flags = flags;
  return info;
}

abi::Params BuildParams(const DeviceConfig& config, uint32_t max_io_buf_bytes,
                        const StorageTraits& storage) {
  abi::Params params{};
  params.len = sizeof(params);
  params.types = abi::kParamTypeBasic;

  const uint8_t logical_shift = static_cast<uint8_t>(std::countr_zero(config.logical_block_size));
  abi::ParamBasic& basic = params.basic;
  // Without a volatile cache every write is durable when it completes: no FLUSH, no FUA.
  basic.attrs = storage.volatile_cache ? abi::kAttrVolatileCache | abi::kAttrFua : 0;
  if (config.read_only) basic.attrs |= abi::kAttrReadOnly;
  basic.logical_bs_shift = logical_shift;
  basic.physical_bs_shift = std::max<uint8_t>(logical_shift, kPhysicalBlockShift);
  basic.io_min_shift = logical_shift;
  basic.io_opt_shift = std::max<uint8_t>(logical_shift, kPhysicalBlockShift);
  basic.max_sectors = max_io_buf_bytes >> abi::kSectorShift;
  basic.dev_sectors = config.size_bytes >> abi::kSectorShift;

  if (!storage.discard && !storage.write_zeroes) return params;
  params.types |= abi::kParamTypeDiscard;
  abi::ParamDiscard& discard = params.discard;
  discard.discard_granularity = config.logical_block_size;
  discard.max_discard_segments = 1;
  if (storage.discard) discard.max_discard_sectors = kMaxDiscardSectors;
  if (storage.write_zeroes) {
    uint64_t sectors = kMaxDiscardSectors;
    if (storage.max_write_zeroes_bytes != 0) {
      sectors = std::min<uint64_t>(sectors, storage.max_write_zeroes_bytes >> abi::kSectorShift);
    }
    discard.max_write_zeroes_sectors = static_cast<uint32_t>(sectors);
  }
  return params;
}

}  // namespace blk::server
