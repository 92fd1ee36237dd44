// A volume's I/O limits between the API (v1::VolumeLimits) and the data path (server::IoLimits):
// the one place that maps the six limits onto each other.
#pragma once

#include "absl/strings/string_view.h"
#include "blk/v1/volume.pb.h"
#include "server/qos/io_limits.h"

namespace blk::agent {

// One of the six limits.
struct IoLimitKind {
  absl::string_view name;   // "read_iops" ... "total_bytes": the metrics' `kind` label
  absl::string_view field;  // its v1::VolumeLimits field, e.g. "read_bytes_per_second"
  bool bytes;               // bytes per second; otherwise operations per second
  server::RateLimit server::IoLimits::*limit;
};

inline constexpr IoLimitKind kIoLimitKinds[] = {
    {"read_iops", "read_iops", false, &server::IoLimits::read_iops},
    {"write_iops", "write_iops", false, &server::IoLimits::write_iops},
    {"total_iops", "total_iops", false, &server::IoLimits::total_iops},
    {"read_bytes", "read_bytes_per_second", true, &server::IoLimits::read_bytes},
    {"write_bytes", "write_bytes_per_second", true, &server::IoLimits::write_bytes},
    {"total_bytes", "total_bytes_per_second", true, &server::IoLimits::total_bytes},
};

// An unset limit (or `limits` unset altogether) is unlimited.
server::IoLimits IoLimitsOf(const v1::VolumeLimits& limits);
// Limits at 0 (unlimited, default burst) are left unset.
v1::VolumeLimits VolumeLimitsOf(const server::IoLimits& limits);

}  // namespace blk::agent
