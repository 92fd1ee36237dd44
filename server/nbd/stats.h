#pragma once

#include <atomic>
#include <cstdint>

namespace blk::server::nbd {

// Per-volume NBD counters, shared by the queues (bumped only on faults, never per I/O). Whoever
// configures the volume may hand one in (NbdBackendConfig::stats) to read them while it runs.
struct Stats {
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint64_t> server_errors{0};    // requests the server answered with an error
  std::atomic<uint64_t> protocol_errors{0};  // connections dropped for a malformed reply
  // Requests failed with EIO after io_timeout (waiting ones, and new ones while still down).
  std::atomic<uint64_t> timeouts{0};
  // FLUSHes failed with EIO: a connection dropped while acknowledged writes were not yet flushed.
  std::atomic<uint64_t> unflushed_losses{0};
};

}  // namespace blk::server::nbd
