#pragma once

#include <cstdint>

#include "server/backend_config.h"
#include "server/qos/io_limits.h"
#include "server/ublk/placement.h"

namespace blk::server {

struct DeviceConfig {
  uint64_t size_bytes = 0;
  uint32_t logical_block_size = 512;  // 512 or 4096
  uint16_t queues = 1;
  uint16_t queue_depth = 128;
  bool read_only = false;
  uint32_t max_io_bytes = 512 * 1024;
  // I/O fails at once while no server runs (UBLK_F_USER_RECOVERY_FAIL_IO) instead of waiting for
  // the next one.
  bool fail_fast = false;
  QueuePlacement placement;
  // Per-I/O statistics (counts, bytes, latency, completion CPU); false skips all of that work.
  bool io_stats = true;
  // The queue threads busy-poll their rings instead of sleeping (lower latency, a busy CPU each).
  bool poll = false;
  // Zero copy where the kernel and the backend allow it; false: always copy (a comparison, or a
  // kernel whose zero copy misbehaves).
  bool zero_copy = true;
  // UBLK_F_BATCH_IO (per-queue PREP/FETCH/COMMIT commands, Linux 7.0+) where the kernel offers it;
  // false: always the classic per-tag FETCH_REQ / COMMIT_AND_FETCH_REQ (a comparison).
  bool batch_io = true;
  // The UBLK_F_* flag that stands for the proposed SUPPORT_RQ_AFFINITY (the kernel completes a
  // request where the queue's rq_affinity says): in no released kernel, so its value is the
  // operator's (blkagent --rq-affinity-feature-bit, checked by RqAffinityFeatureFlag). 0: never
  // asked for, whatever the kernel advertises.
  uint64_t rq_affinity_flag = 0;
  // The limits the device starts with (Device::SetLimits changes them while it runs).
  IoLimits limits;
  // false: the queues run without the throttling layer (ThrottlingBackend), and limits are
  // refused (a comparison of what unlimited volumes pay for it).
  bool io_limits = true;
  BackendConfig backend;
};

}  // namespace blk::server
