#include "server/qos/limiter.h"

#include <algorithm>

namespace blk::server {
namespace {

constexpr int64_t kNsPerSecond = 1000000000;

// `units` at `rate` per second, in ns (128-bit: 100 GB at 1 byte/s would not fit 64 bits).
int64_t DurationNs(uint64_t units, uint64_t rate) {
  const unsigned __int128 ns = static_cast<unsigned __int128>(units) * kNsPerSecond / rate;
  return static_cast<int64_t>(std::min<unsigned __int128>(ns, INT64_MAX / 4));
}

}  // namespace

Limiter::Limiter(const IoLimits& limits, uint32_t max_request_bytes)
    : max_request_bytes_(max_request_bytes) {
  Set(limits, 0);
}

void Limiter::Set(const IoLimits& limits, int64_t now_ns) {
  const RateLimit* each[kBuckets] = {&limits.read_iops,  &limits.write_iops,  &limits.total_iops,
                                     &limits.read_bytes, &limits.write_bytes, &limits.total_bytes};
  for (int i = 0; i < kBuckets; ++i) {
    const uint64_t smallest = i >= kReadBytes ? max_request_bytes_ : 1;
    Bucket& bucket = buckets_[i];
    const uint64_t old_rate = bucket.rate.load(std::memory_order_relaxed);
    const uint64_t new_rate = each[i]->rate;
    bucket.burst.store(EffectiveBurst(*each[i], smallest), std::memory_order_relaxed);
    bucket.rate.store(new_rate, std::memory_order_relaxed);
    int64_t drained_at = bucket.drained_at_ns.load(std::memory_order_relaxed);
    int64_t rescaled = 0;
    do {
      rescaled = 0;
      if (old_rate != 0 && new_rate != 0 && drained_at > now_ns) {
        const unsigned __int128 units =
            static_cast<unsigned __int128>(drained_at - now_ns) * old_rate / kNsPerSecond;
        rescaled = now_ns + DurationNs(static_cast<uint64_t>(units), new_rate);
      }
    } while (!bucket.drained_at_ns.compare_exchange_weak(drained_at, rescaled,
                                                         std::memory_order_relaxed));
  }
  unlimited_.store(limits.unlimited(), std::memory_order_relaxed);
}

IoLimits Limiter::limits() const {
  RateLimit each[kBuckets];
  for (int i = 0; i < kBuckets; ++i) {
    each[i].rate = buckets_[i].rate.load(std::memory_order_relaxed);
    each[i].burst = each[i].rate == 0 ? 0 : buckets_[i].burst.load(std::memory_order_relaxed);
  }
  return {each[0], each[1], each[2], each[3], each[4], each[5]};
}

int64_t Limiter::Take(Bucket& bucket, uint64_t units, int64_t now_ns) {
  const uint64_t rate = bucket.rate.load(std::memory_order_relaxed);
  if (rate == 0 || units == 0) return 0;
  const int64_t cost = DurationNs(units, rate);
  const int64_t capacity = DurationNs(bucket.burst.load(std::memory_order_relaxed), rate);
  int64_t drained_at = bucket.drained_at_ns.load(std::memory_order_relaxed);
  while (true) {
    // What the bucket holds now is how long it takes to drain; room is what is left of it.
    const int64_t next = std::max(drained_at, now_ns) + cost;
    if (next - now_ns > capacity) return next - now_ns - capacity;
    if (bucket.drained_at_ns.compare_exchange_weak(drained_at, next, std::memory_order_relaxed)) {
      return 0;
    }
  }
}

int64_t Limiter::TryAdmit(bool write, uint32_t data_bytes, int64_t now_ns, Paid& paid) {
  struct Charge {
    int bucket;
    uint64_t units;
  };
  const Charge charges[4] = {{write ? kWriteIops : kReadIops, 1},
                             {kTotalIops, 1},
                             {write ? kWriteBytes : kReadBytes, data_bytes},
                             {kTotalBytes, data_bytes}};
  for (const Charge& charge : charges) {
    const Paid bit = static_cast<Paid>(1u << charge.bucket);
    if ((paid & bit) != 0) continue;
    if (const int64_t wait = Take(buckets_[charge.bucket], charge.units, now_ns); wait > 0) {
      return wait;
    }
    paid |= bit;
  }
  return 0;
}

void Limiter::RecordWait(int64_t wait_ns) {
  throttled_requests_.fetch_add(1, std::memory_order_relaxed);
  throttled_wait_ns_.fetch_add(static_cast<uint64_t>(wait_ns), std::memory_order_relaxed);
}

ThrottleCounts Limiter::counts() const {
  return {throttled_requests_.load(std::memory_order_relaxed),
          throttled_wait_ns_.load(std::memory_order_relaxed)};
}

}  // namespace blk::server
