#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "blk/v1/volume.pb.h"

namespace blk::client {

// An IOPS limit as typed by an operator: "N" or "N:BURST", whole non-negative numbers of
// operations (0: unlimited; no burst: the agent's default).
absl::StatusOr<blk::v1::RateLimit> ParseIopsLimit(absl::string_view text);

// A bandwidth limit: "SIZE" or "SIZE:BURST", each a byte count as ParseSize reads it ("50M",
// "1G:2G"): bytes per second, and the burst in bytes.
absl::StatusOr<blk::v1::RateLimit> ParseBytesLimit(absl::string_view text);

}  // namespace blk::client
