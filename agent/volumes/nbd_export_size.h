// The size of an NBD volume created without one: the export's, learned by a handshake.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "server/backend_config.h"

namespace blk::agent {

// Connects to an NBD URI and returns the export's size in bytes. Blocking.
using NbdSizeProbe = std::function<absl::StatusOr<uint64_t>(const std::string& uri)>;

// The probe the agent uses: a real handshake (server::nbd::ProbeExport) whose every step gives up
// after `timeout` (blkagent --nbd-connect-timeout).
NbdSizeProbe RealNbdSizeProbe(std::chrono::milliseconds timeout =
                                  std::chrono::milliseconds(server::kDefaultNbdConnectTimeoutMs));

// The export's size rounded down to a multiple of the logical block size (the rounding is
// logged). An unreachable export is UNAVAILABLE, an export smaller than one block
// INVALID_ARGUMENT; both name the URI.
absl::StatusOr<uint64_t> ResolveNbdVolumeSize(const std::string& volume_id, const std::string& uri,
                                              uint32_t logical_block_size,
                                              const NbdSizeProbe& probe);

}  // namespace blk::agent
