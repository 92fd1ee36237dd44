#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace blk::server {

enum class IoKind : uint8_t { kRead, kWrite, kFlush, kDiscard, kWriteZeroes, kOther, kCount };

// Upper bounds of the latency histogram's buckets, 10 us to 10 s in 1-2.5-5 steps; one more
// bucket above the last bound catches the rest.
inline constexpr std::array<uint64_t, 19> kLatencyBoundsNs = {
    10'000,        25'000,        50'000,        100'000,       250'000,
    500'000,       1'000'000,     2'500'000,     5'000'000,     10'000'000,
    25'000'000,    50'000'000,    100'000'000,   250'000'000,   500'000'000,
    1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
inline constexpr int kLatencyBuckets = static_cast<int>(kLatencyBoundsNs.size()) + 1;

constexpr int LatencyBucket(uint64_t ns) {
  int bucket = 0;
  while (bucket < kLatencyBuckets - 1 && ns > kLatencyBoundsNs[bucket]) ++bucket;
  return bucket;
}

// Per-queue counters written only by the queue thread (relaxed load + store, no locked
// instruction) and read by anyone (e.g. a metrics scrape). Cache-line aligned so queues do not
// share lines.
struct alignas(64) IoCounters {
  static constexpr int kKinds = static_cast<int>(IoKind::kCount);
  std::atomic<uint64_t> ios[kKinds] = {};
  std::atomic<uint64_t> bytes[kKinds] = {};
  std::atomic<uint64_t> errors[kKinds] = {};
  // Time from the queue receiving a request to committing its result, per bucket (not
  // cumulative), and the sum of those times.
  std::atomic<uint64_t> latency[kKinds][kLatencyBuckets] = {};
  std::atomic<uint64_t> latency_sum_ns[kKinds] = {};
  // Requests handed to the backend and not yet completed, as of the end of the last loop turn.
  std::atomic<uint32_t> inflight{0};
  // Results committed while the queue thread ran on a CPU inside the queue's hctx CPU set (local)
  // or outside it (remote).
  std::atomic<uint64_t> local_completions{0};
  std::atomic<uint64_t> remote_completions{0};

  static void Bump(std::atomic<uint64_t>& counter, uint64_t by) {
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
  void Record(IoKind kind, int32_t result, uint64_t latency_ns) {
    const int k = static_cast<int>(kind);
    Bump(ios[k], 1);
    if (result < 0) {
      Bump(errors[k], 1);
    } else {
      Bump(bytes[k], static_cast<uint64_t>(result));
    }
    Bump(latency[k][LatencyBucket(latency_ns)], 1);
    Bump(latency_sum_ns[k], latency_ns);
  }
};

}  // namespace blk::server
