// The limiter's buckets on a made-up clock: a full burst at once, then the rate; reads and writes
// against their own and the total buckets; a large request keeping its place among small ones;
// new limits at once; and two threads never admitting more than the bucket holds.
#include "server/qos/limiter.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace blk::server {
namespace {

constexpr int64_t kSecond = 1000000000;
constexpr uint32_t kMaxRequest = 512 * 1024;

// How long a request asking at `now` waits (its place reserved).
int64_t Wait(Limiter& limiter, bool write, uint32_t bytes, int64_t now) {
  return std::max<int64_t>(0, limiter.Reserve(write, bytes, now) - now);
}

TEST(Limiter, WithoutLimitsEverythingIsAdmittedAndTheQueuesSkipIt) {
  Limiter limiter({}, kMaxRequest);
  EXPECT_TRUE(limiter.unlimited());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(Wait(limiter, i % 2 == 0, 4096, kSecond), 0);
}

TEST(Limiter, AFullBurstGoesAtOnceThenOneRequestPerInterval) {
  IoLimits limits;
  limits.read_iops = {100, 0};  // burst: a tenth of a second, 10 requests
  Limiter limiter(limits, kMaxRequest);
  EXPECT_FALSE(limiter.unlimited());
  const int64_t now = 5 * kSecond;
  for (int i = 0; i < 10; ++i) ASSERT_EQ(Wait(limiter, false, 4096, now), 0) << i;
  EXPECT_EQ(Wait(limiter, false, 4096, now), kSecond / 100);
  // The next one asking at the same time goes after it: its place was taken.
  EXPECT_EQ(Wait(limiter, false, 4096, now), 2 * kSecond / 100);
  // Writes have no limit of their own and no total: untouched.
  EXPECT_EQ(Wait(limiter, true, 4096, now), 0);
}

TEST(Limiter, OverOneSecondTheRateAndTheBurstAreAdmittedNoMore) {
  IoLimits limits;
  limits.total_iops = {1000, 50};
  Limiter limiter(limits, kMaxRequest);
  // A queue that always has a request waiting: each asks once the one before it went.
  int went = 0;
  for (int64_t now = kSecond;; ++went) {
    now = std::max(now, limiter.Reserve(went % 3 == 0, 4096, now));
    if (now >= 2 * kSecond) break;
  }
  EXPECT_GE(went, 1000);
  EXPECT_LE(went, 1000 + 50);
}

TEST(Limiter, ABytesBucketHoldsAtLeastTheLargestRequest) {
  IoLimits limits;
  limits.write_bytes = {1 << 20, 4096};  // a burst smaller than a request is raised to one
  Limiter limiter(limits, kMaxRequest);
  const int64_t now = kSecond;
  EXPECT_EQ(Wait(limiter, true, kMaxRequest, now), 0);
  EXPECT_EQ(Wait(limiter, true, kMaxRequest, now), kSecond / 2);
  EXPECT_EQ(limiter.limits().write_bytes.burst, kMaxRequest);
  // Reads, and writes without data (write-zeroes, discard), are not write bytes.
  EXPECT_EQ(Wait(limiter, false, kMaxRequest, now), 0);
  EXPECT_EQ(Wait(limiter, true, 0, now), 0);
}

TEST(Limiter, ARequestWaitsForItsSlowestBucket) {
  IoLimits limits;
  limits.read_iops = {10, 1};  // one read per 100 ms
  limits.total_iops = {5, 1};  // one request per 200 ms
  Limiter limiter(limits, kMaxRequest);
  const int64_t now = kSecond;
  ASSERT_EQ(Wait(limiter, false, 4096, now), 0);
  EXPECT_EQ(Wait(limiter, false, 4096, now), kSecond / 5);
  EXPECT_EQ(Wait(limiter, false, 4096, now), 2 * kSecond / 5);
}

// A large request must not wait for a bucket with room for all of it: small ones from another
// queue would take every bit of room as it appears, and it would wait for as long as they come.
TEST(Limiter, ALargeRequestKeepsItsPlaceAmongAStreamOfSmallOnes) {
  IoLimits limits;
  limits.total_bytes = {1 << 20, 0};  // the bucket: the largest request, 512 KiB (half a second)
  Limiter limiter(limits, kMaxRequest);
  const int64_t large_asks_at = 3 * kSecond / 2;
  int64_t large_goes_at = -1;
  // One queue sends 4 KiB reads back to back from 1 s on; the other asks for 512 KiB at 1.5 s.
  for (int64_t now = kSecond; now < 3 * kSecond;) {
    if (large_goes_at < 0 && now >= large_asks_at) {
      large_goes_at = limiter.Reserve(false, kMaxRequest, now);
    }
    now = std::max(now, limiter.Reserve(false, 4096, now));
    if (large_goes_at >= 0) {
      ASSERT_GE(now, large_goes_at) << "a later small read went first";
    }
  }
  ASSERT_GE(large_goes_at, 0);
  // It waited for what was charged before it: the bucket's half second and a small read or two.
  EXPECT_LE(large_goes_at - large_asks_at, kSecond / 2 + kSecond / 128);
}

TEST(Limiter, NewLimitsApplyToTheNextRequest) {
  IoLimits limits;
  limits.read_iops = {10, 1};
  Limiter limiter(limits, kMaxRequest);
  const int64_t now = kSecond;
  ASSERT_EQ(Wait(limiter, false, 4096, now), 0);
  EXPECT_EQ(Wait(limiter, false, 4096, now), kSecond / 10);
  const uint64_t generation = limiter.generation();
  limits.read_iops = {1000, 1};
  limiter.Set(limits, now);
  EXPECT_NE(limiter.generation(), generation);
  EXPECT_EQ(limiter.limits().read_iops.rate, 1000u);
  // The two requests charged drain at the new rate: 2 ms, not 200.
  EXPECT_EQ(Wait(limiter, false, 4096, now), 2 * kSecond / 1000);
  limiter.Set({}, now);
  EXPECT_TRUE(limiter.unlimited());
}

TEST(Limiter, TwoQueuesTogetherGetNoMoreThanTheBucketHolds) {
  IoLimits limits;
  limits.total_iops = {1000, 300};
  Limiter limiter(limits, kMaxRequest);
  std::atomic<int> admitted{0};
  auto queue = [&] {
    for (int i = 0; i < 5000; ++i) {
      if (Wait(limiter, i % 2 == 0, 4096, kSecond) == 0) admitted.fetch_add(1);
    }
  };
  std::thread a(queue);
  std::thread b(queue);
  a.join();
  b.join();
  EXPECT_EQ(admitted.load(), 300);
}

TEST(Limiter, WaitsAreCounted) {
  Limiter limiter({}, kMaxRequest);
  limiter.RecordWait(1500);
  limiter.RecordWait(500);
  EXPECT_EQ(limiter.counts().requests, 2u);
  EXPECT_EQ(limiter.counts().wait_ns, 2000u);
}

}  // namespace
}  // namespace blk::server
