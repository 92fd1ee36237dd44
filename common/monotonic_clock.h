#pragma once

#include <time.h>

#include <cstdint>

namespace blk {

// CLOCK_MONOTONIC in nanoseconds; through the vDSO, so no system call: the data path may read it.
inline int64_t MonotonicNs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

}  // namespace blk
