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
  generation_.fetch_add(1, std::memory_order_release);
}

IoLimits Limiter::limits() const {
  RateLimit each[kBuckets];
  for (int i = 0; i < kBuckets; ++i) {
    each[i].rate = buckets_[i].rate.load(std::memory_order_relaxed);
    each[i].burst = each[i].rate == 0 ? 0 : buckets_[i].burst.load(std::memory_order_relaxed);
  }
  return {each[0], each[1], each[2], each[3], each[4], each[5]};
}

int64_t Limiter::Charge(Bucket& bucket, uint64_t units, int64_t now_ns) {
  const uint64_t rate = bucket.rate.load(std::memory_order_relaxed);
  if (rate == 0 || units == 0) return now_ns;
  const int64_t cost = DurationNs(units, rate);
  const int64_t capacity = DurationNs(bucket.burst.load(std::memory_order_relaxed), rate);
  int64_t drained_at = bucket.drained_at_ns.load(std::memory_order_relaxed);
  int64_t next = 0;
  do {
    // What the bucket holds is how long it takes to drain; the request goes once what it holds,
    // the request included, fits in its size.
    next = std::max(drained_at, now_ns) + cost;
  } while (
      !bucket.drained_at_ns.compare_exchange_weak(drained_at, next, std::memory_order_relaxed));
  return next - capacity;
}

int64_t Limiter::Reserve(bool write, uint32_t data_bytes, int64_t now_ns) {
  return std::max({Charge(buckets_[write ? kWriteIops : kReadIops], 1, now_ns),
                   Charge(buckets_[kTotalIops], 1, now_ns),
                   Charge(buckets_[write ? kWriteBytes : kReadBytes], data_bytes, now_ns),
                   Charge(buckets_[kTotalBytes], data_bytes, now_ns)});
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
