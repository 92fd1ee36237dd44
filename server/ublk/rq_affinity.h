// A block device's completion CPU policy, queue/rq_affinity in sysfs: 0 (complete wherever the
// driver completes), 1 (in the submitting CPU's group), 2 (on the submitting CPU).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace blk::server {

inline constexpr uint32_t kMaxRqAffinity = 2;

// Writes `value` (0..2, else InvalidArgument) to <queue_dir>/rq_affinity (see queue_sysfs.h).
absl::Status WriteRqAffinity(const std::string& queue_dir, uint32_t value);
absl::StatusOr<uint32_t> ReadRqAffinity(const std::string& queue_dir);

}  // namespace blk::server
