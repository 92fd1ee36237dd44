#include "agent/devices/volume_io_limits.h"

namespace blk::agent {
namespace {

server::RateLimit RateLimitOf(const v1::RateLimit& limit) {
  return {.rate = limit.rate(), .burst = limit.burst()};
}

void SetUnlessDefault(const server::RateLimit& limit, v1::RateLimit* (v1::VolumeLimits::*field)(),
                      v1::VolumeLimits& limits) {
  if (limit == server::RateLimit{}) return;
  v1::RateLimit& out = *(limits.*field)();
  out.set_rate(limit.rate);
  out.set_burst(limit.burst);
}

}  // namespace

server::IoLimits IoLimitsOf(const v1::VolumeLimits& limits) {
  return {.read_iops = RateLimitOf(limits.read_iops()),
          .write_iops = RateLimitOf(limits.write_iops()),
          .total_iops = RateLimitOf(limits.total_iops()),
          .read_bytes = RateLimitOf(limits.read_bytes_per_second()),
          .write_bytes = RateLimitOf(limits.write_bytes_per_second()),
          .total_bytes = RateLimitOf(limits.total_bytes_per_second())};
}

v1::VolumeLimits VolumeLimitsOf(const server::IoLimits& limits) {
  v1::VolumeLimits out;
  SetUnlessDefault(limits.read_iops, &v1::VolumeLimits::mutable_read_iops, out);
  SetUnlessDefault(limits.write_iops, &v1::VolumeLimits::mutable_write_iops, out);
  SetUnlessDefault(limits.total_iops, &v1::VolumeLimits::mutable_total_iops, out);
  SetUnlessDefault(limits.read_bytes, &v1::VolumeLimits::mutable_read_bytes_per_second, out);
  SetUnlessDefault(limits.write_bytes, &v1::VolumeLimits::mutable_write_bytes_per_second, out);
  SetUnlessDefault(limits.total_bytes, &v1::VolumeLimits::mutable_total_bytes_per_second, out);
  return out;
}

}  // namespace blk::agent
