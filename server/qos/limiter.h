// A device's I/O limits as token buckets its queues share without a lock: each bucket is one
// atomic time (GCRA's theoretical arrival time: when everything charged so far has drained at
// the limit's rate), moved forward by compare-and-swap. A request is charged when it first asks,
// whether or not the buckets have room, and goes once they have drained enough for it: its place
// is reserved, so requests are served in the order they asked, across queues (a large request
// waiting for room for all of it would otherwise starve behind a stream of small ones taking
// every bit of room that appears).
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

  // Charges a request (`write`: a write, write-zeroes or discard; `data_bytes`: the bytes it
  // carries, 0 for those without data) at `now_ns` (CLOCK_MONOTONIC) in every bucket it counts
  // against and returns when it may go: at or before `now_ns` when they had room. A queue asks
  // for one waiting request at a time (its oldest), so what is reserved beyond the buckets' size
  // is at most a request per queue.
  int64_t Reserve(bool write, uint32_t data_bytes, int64_t now_ns);

  // Changes with every Set: a request reserved under other limits need not keep its time (its
  // charge is in the backlog Set rescaled to the new rates).
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // A forced stop: the kernel's STOP_DEV waits for every request it handed over, and a request
  // held by a low limit could keep it for hours. From now on the queues fail what they hold, and
  // what arrives over a limit, with EIO (within ThrottlingBackend::kMaxWaitMs).
  void FailHeld() { fail_held_.store(true, std::memory_order_release); }
  bool failing_held() const { return fail_held_.load(std::memory_order_acquire); }

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
  // Charges `units` to `bucket`; returns when they fit in its size (CLOCK_MONOTONIC ns).
  static int64_t Charge(Bucket& bucket, uint64_t units, int64_t now_ns);

  uint32_t max_request_bytes_;
  Bucket buckets_[kBuckets];
  std::atomic<bool> unlimited_{true};
  std::atomic<bool> fail_held_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> throttled_requests_{0};
  std::atomic<uint64_t> throttled_wait_ns_{0};
};

}  // namespace blk::server
