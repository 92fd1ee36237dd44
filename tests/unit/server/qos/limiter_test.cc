// The limiter's buckets on a made-up clock: a full burst at once, then the rate; reads and writes
// against their own and the total buckets; new limits at once; and two threads never admitting
// more than the bucket holds.
#include "server/qos/limiter.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace blk::server {
namespace {

constexpr int64_t kSecond = 1000000000;
constexpr uint32_t kMaxRequest = 512 * 1024;

int64_t Admit(Limiter& limiter, bool write, uint32_t bytes, int64_t now) {
  Limiter::Paid paid = 0;
  return limiter.TryAdmit(write, bytes, now, paid);
}

TEST(Limiter, WithoutLimitsEverythingIsAdmittedAndTheQueuesSkipIt) {
  Limiter limiter({}, kMaxRequest);
  EXPECT_TRUE(limiter.unlimited());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(Admit(limiter, i % 2 == 0, 4096, kSecond), 0);
}

TEST(Limiter, AFullBurstGoesAtOnceThenOneRequestPerInterval) {
  IoLimits limits;
  limits.read_iops = {100, 0};  // burst: a tenth of a second, 10 requests
  Limiter limiter(limits, kMaxRequest);
  EXPECT_FALSE(limiter.unlimited());
  int64_t now = 5 * kSecond;
  for (int i = 0; i < 10; ++i) ASSERT_EQ(Admit(limiter, false, 4096, now), 0) << i;
  const int64_t wait = Admit(limiter, false, 4096, now);
  EXPECT_EQ(wait, kSecond / 100);
  EXPECT_GT(Admit(limiter, false, 4096, now + wait - 1), 0);
  EXPECT_EQ(Admit(limiter, false, 4096, now + wait), 0);
  // Writes have no limit of their own and no total: untouched.
  EXPECT_EQ(Admit(limiter, true, 4096, now), 0);
}

TEST(Limiter, OverOneSecondTheRateAndTheBurstAreAdmittedNoMore) {
  IoLimits limits;
  limits.total_iops = {1000, 50};
  Limiter limiter(limits, kMaxRequest);
  int admitted = 0;
  // A request asking every 100 us for one second.
  for (int64_t now = kSecond; now < 2 * kSecond; now += 100000) {
    admitted += Admit(limiter, now % 3 == 0, 4096, now) == 0 ? 1 : 0;
  }
  EXPECT_GE(admitted, 1000);
  EXPECT_LE(admitted, 1000 + 50);
}

TEST(Limiter, ABytesBucketHoldsAtLeastTheLargestRequest) {
  IoLimits limits;
  limits.write_bytes = {1 << 20, 4096};  // a burst smaller than a request is raised to one
  Limiter limiter(limits, kMaxRequest);
  const int64_t now = kSecond;
  EXPECT_EQ(Admit(limiter, true, kMaxRequest, now), 0);
  EXPECT_EQ(Admit(limiter, true, kMaxRequest, now), kSecond / 2);
  EXPECT_EQ(limiter.limits().write_bytes.burst, kMaxRequest);
  // Reads, and writes without data (write-zeroes, discard), are not write bytes.
  EXPECT_EQ(Admit(limiter, false, kMaxRequest, now), 0);
  EXPECT_EQ(Admit(limiter, true, 0, now), 0);
}

TEST(Limiter, ARequestWaitingOnOneBucketIsNotChargedAgainInTheOthers) {
  IoLimits limits;
  limits.read_iops = {10, 1};  // one read per 100 ms
  limits.total_iops = {5, 1};  // one request per 200 ms
  Limiter limiter(limits, kMaxRequest);
  const int64_t now = kSecond;
  ASSERT_EQ(Admit(limiter, false, 4096, now), 0);
  // 100 ms on the read bucket has room and takes it; the total bucket has none for 100 ms more.
  Limiter::Paid paid = 0;
  EXPECT_EQ(limiter.TryAdmit(false, 4096, now + kSecond / 10, paid), kSecond / 10);
  EXPECT_NE(paid, 0);
  EXPECT_EQ(limiter.TryAdmit(false, 4096, now + kSecond / 5, paid), 0);
  // Charged once in the read bucket, a new read now waits for the total bucket (200 ms), not
  // for a read bucket charged twice (it would say 100 ms).
  EXPECT_EQ(Admit(limiter, false, 4096, now + kSecond / 5), kSecond / 5);
}

TEST(Limiter, NewLimitsApplyToTheNextRequest) {
  IoLimits limits;
  limits.read_iops = {10, 1};
  Limiter limiter(limits, kMaxRequest);
  const int64_t now = kSecond;
  ASSERT_EQ(Admit(limiter, false, 4096, now), 0);
  EXPECT_EQ(Admit(limiter, false, 4096, now), kSecond / 10);
  limits.read_iops = {1000, 1};
  limiter.Set(limits, now);
  EXPECT_EQ(limiter.limits().read_iops.rate, 1000u);
  EXPECT_EQ(Admit(limiter, false, 4096, now + kSecond / 1000), 0);
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
      if (Admit(limiter, i % 2 == 0, 4096, kSecond) == 0) admitted.fetch_add(1);
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
