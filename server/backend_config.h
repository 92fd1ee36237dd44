#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "server/local/file_stats.h"
#include "server/nbd/stats.h"
#include "server/nvme/stats.h"

namespace blk::server {

// Reads return zeroes, everything else succeeds at once.
struct NullBackendConfig {};
// A regular file (created sparse at the device size when missing) or a block device.
struct FileBackendConfig {
  std::string path;
  std::shared_ptr<FileStats> stats{};  // optional: the caller reads a truncated backing here
};
// NbdBackendConfig::connect_timeout_ms unless told otherwise (blkagent --nbd-connect-timeout).
inline constexpr uint32_t kDefaultNbdConnectTimeoutMs = 10000;
// A remote export: "nbd://host[:port]/export" or "nbd+unix:///export?socket=PATH". Requests
// wait up to io_timeout_ms for a lost connection to come back, then fail with EIO. Opening the
// volume (and each later connection a queue or a resize makes) gives up when one step of the
// handshake (connect, a read, a write) takes longer than connect_timeout_ms.
struct NbdBackendConfig {
  std::string uri;
  uint32_t io_timeout_ms = 30000;
  std::shared_ptr<nbd::Stats> stats;  // optional: counters the caller wants to read
  uint32_t connect_timeout_ms = kDefaultNbdConnectTimeoutMs;
};
// An NVMe namespace through its generic char device (/dev/ngXnY) and io_uring passthrough. The
// volume starts `offset_bytes` into the namespace (a multiple of its LBA size).
// `path_failover_ms` > 0 (a multipath head of a fabric namespace): a command failing for a path
// reason (nvme::PathFailure) is resubmitted until that long after its first failure, then its
// request fails with EIO; 0 (a local namespace): such a failure ends the request at once.
struct NvmeBackendConfig {
  std::string path;
  uint64_t offset_bytes = 0;
  std::shared_ptr<NvmeStats> stats;  // optional: the caller reads a vanished namespace here
  uint32_t path_failover_ms = 0;
};
using BackendConfig =
    std::variant<NullBackendConfig, FileBackendConfig, NbdBackendConfig, NvmeBackendConfig>;

}  // namespace blk::server
