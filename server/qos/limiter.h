// A device's I/O limits as token buckets its queues share without a lock: each bucket is one
// atomic time (GCRA's theoretical arrival time: when everything admitted so far has drained at
// the limit's rate), moved forward by compare-and-swap when a request is admitted. A request is
// admitted when every bucket it counts against has room for it; the rest wait in their queue
// (ThrottlingBackend) and ask again.
#pragma once

#include <atomic>
#include <cstdint>

#include "server/qos/io_limits.h"

namespace blk::server {

class Limiter {
 public:
  // `max_request_bytes`: the largest request the device hands over (a bytes bucket holds at
  // least that much, or such a request could never pass).
  Limiter(const IoLimits& limits, uint32_t max_request_bytes);

  // Any thread, while queues admit requests, `now_ns` being CLOCK_MONOTONIC's time: requests not
  // yet admitted see the new limits. What a bucket holds is kept in units (a backlog admitted at
  // a low rate drains at the new, higher one at once).
  void Set(const IoLimits& limits, int64_t now_ns);
  IoLimits limits() const;
  // True while no limit is set: the queues skip the buckets entirely.
  bool unlimited() const { return unlimited_.load(std::memory_order_relaxed); }

  // Bits of `paid`: the buckets a waiting request was already charged in, so that asking again
  // charges only the others. A new request starts with 0.
  using Paid = uint8_t;
  // Admits a request (`write`: a write, write-zeroes or discard; `data_bytes`: the bytes it
  // carries, 0 for those without data) at `now_ns` (CLOCK_MONOTONIC): 0 when every bucket it
  // counts against took it, else how many ns until the first one that refused may have room.
  int64_t TryAdmit(bool write, uint32_t data_bytes, int64_t now_ns, Paid& paid);

  // Throttling the queues report: a request that waited `wait_ns` before its admission.
  void RecordWait(int64_t wait_ns);
  ThrottleCounts counts() const;

 private:
  enum BucketIndex { kReadIops, kWriteIops, kTotalIops, kReadBytes, kWriteBytes, kTotalBytes };
  static constexpr int kBuckets = 6;

  struct Bucket {
    std::atomic<uint64_t> rate{0};   // units per second, 0 = unlimited
    std::atomic<uint64_t> burst{0};  // units the bucket holds
    std::atomic<int64_t> drained_at_ns{0};
  };
  // 0 when `bucket` took `units`, else the ns until it may have room.
  static int64_t Take(Bucket& bucket, uint64_t units, int64_t now_ns);

  uint32_t max_request_bytes_;
  Bucket buckets_[kBuckets];
  std::atomic<bool> unlimited_{true};
  std::atomic<uint64_t> throttled_requests_{0};
  std::atomic<uint64_t> throttled_wait_ns_{0};
};

}  // namespace blk::server
