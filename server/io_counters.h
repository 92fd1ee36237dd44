#pragma once

#include <atomic>
#include <cstdint>

namespace blk::server {

enum class IoKind : uint8_t { kRead, kWrite, kFlush, kDiscard, kWriteZeroes, kOther, kCount };

// Per-queue counters written only by the queue thread (relaxed load + store, no locked
// instruction) and read by anyone (e.g. a metrics scrape). Cache-line aligned so queues do not
// share lines.
struct alignas(64) IoCounters {
  static constexpr int kKinds = static_cast<int>(IoKind::kCount);
  std::atomic<uint64_t> ios[kKinds] = {};
  std::atomic<uint64_t> bytes[kKinds] = {};
  std::atomic<uint64_t> errors[kKinds] = {};

  static void Bump(std::atomic<uint64_t>& counter, uint64_t by) {
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
  void Record(IoKind kind, int32_t result) {
    const int k = static_cast<int>(kind);
    Bump(ios[k], 1);
    if (result < 0) {
      Bump(errors[k], 1);
    } else {
      Bump(bytes[k], static_cast<uint64_t>(result));
    }
  }
};

}  // namespace blk::server
