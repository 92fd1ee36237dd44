#pragma once

#include <atomic>
#include <cstdint>

namespace blk::server {

// Per-volume NVMe fault record, shared by the queues (written only when a command finds the
// namespace gone, never per I/O). Whoever configures the volume may hand one in
// (NvmeBackendConfig::stats) to read it while the volume runs.
struct NvmeStats {
  // Requests failed with EIO because the namespace or its controller went away.
  std::atomic<uint64_t> gone_errors{0};
  // The URING_CMD result of the latest of them (a negative errno or an NVMe status).
  std::atomic<int32_t> gone_result{0};
  // Commands resubmitted after failing for a path or transport reason (path failover on).
  std::atomic<uint64_t> failovers{0};
  // Requests failed with EIO because no path served them within the failover bound.
  std::atomic<uint64_t> failover_timeouts{0};
};

}  // namespace blk::server
