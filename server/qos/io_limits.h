// A volume's I/O limits: operations and bytes per second, for reads, writes and both, each with
// a burst. What the data path enforces (server/qos/limiter.h) and what the agent persists.
#pragma once

#include <cstdint>

namespace blk::server {

// `rate` units (operations or bytes) per second, 0 = unlimited. `burst`: how many units may go
// at once after a quiet spell (the bucket's size); 0 = the default, a tenth of a second's worth.
struct RateLimit {
  uint64_t rate = 0;
  uint64_t burst = 0;
  bool operator==(const RateLimit&) const = default;
};

struct IoLimits {
  RateLimit read_iops;
  RateLimit write_iops;
  RateLimit total_iops;
  RateLimit read_bytes;
  RateLimit write_bytes;
  RateLimit total_bytes;
  bool operator==(const IoLimits&) const = default;
  bool unlimited() const { return *this == IoLimits{}; }
};

// The bucket size a limit works with: its burst, or a tenth of its rate when 0, never less than
// `smallest` (one operation, or the largest request for a bytes limit: a bucket smaller than one
// request could never let it through).
inline uint64_t EffectiveBurst(const RateLimit& limit, uint64_t smallest) {
  uint64_t burst = limit.burst != 0 ? limit.burst : limit.rate / 10;
  return burst < smallest ? smallest : burst;
}

// What throttling cost a volume so far, summed over its queues.
struct ThrottleCounts {
  uint64_t requests = 0;  // requests that waited for their limit
  uint64_t wait_ns = 0;   // their waits, summed
};

}  // namespace blk::server
