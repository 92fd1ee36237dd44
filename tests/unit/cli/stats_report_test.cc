#include "cli/stats_report.h"

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::cli {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

// Bounds 10 us, 100 us, 1 ms, then the overflow bucket.
blk::v1::VolumeStats Snapshot(uint64_t reads, uint64_t writes,
                              const std::vector<uint64_t>& read_buckets, double read_latency_sum) {
  blk::v1::VolumeStats stats;
  for (double bound : {0.00001, 0.0001, 0.001}) stats.add_latency_bounds_seconds(bound);
  blk::v1::IoOpStats* read = stats.add_ops();
  read->set_op("read");
  read->set_ios(reads);
  read->set_bytes(reads * 4096);
  for (uint64_t n : read_buckets) read->add_latency_buckets(n);
  read->set_latency_sum_seconds(read_latency_sum);
  blk::v1::IoOpStats* write = stats.add_ops();
  write->set_op("write");
  write->set_ios(writes);
  write->set_bytes(writes * 512);
  for (int b = 0; b < 4; ++b) write->add_latency_buckets(0);
  stats.set_inflight_ios(3);
  return stats;
}

TEST(ComputeInterval, RatesAreDeltasOverTheElapsedTime) {
  const auto before = Snapshot(1000, 10, {1000, 0, 0, 0}, 0.001);
  const auto after = Snapshot(3000, 30, {3000, 0, 0, 0}, 0.003);
  StatsInterval interval = ComputeInterval(before, after, absl::Seconds(2));
  EXPECT_DOUBLE_EQ(interval.read_iops, 1000);
  EXPECT_DOUBLE_EQ(interval.write_iops, 10);
  EXPECT_DOUBLE_EQ(interval.read_bytes_per_second, 1000 * 4096);
  EXPECT_DOUBLE_EQ(interval.write_bytes_per_second, 10 * 512);
  EXPECT_EQ(interval.inflight_ios, 3u);
}

TEST(ComputeInterval, LatencyComesFromTheHistogramDelta) {
  // Before: 100 slow reads; in the interval: 99 reads under 10 us and one between 100 us and 1 ms.
  const auto before = Snapshot(100, 0, {0, 0, 0, 100}, 500);
  const auto after = Snapshot(200, 0, {99, 0, 1, 100}, 500.0005);
  StatsInterval interval = ComputeInterval(before, after, absl::Seconds(1));
  EXPECT_THAT(interval.avg_latency_seconds, DoubleNear(0.000005, 1e-9));
  // The 99th of 100 is the last one in the first bucket: its upper bound.
  EXPECT_THAT(interval.p99_latency_seconds, DoubleNear(0.00001, 1e-12));
}

TEST(ComputeInterval, P99InterpolatesWithinItsBucket) {
  const auto before = Snapshot(0, 0, {0, 0, 0, 0}, 0);
  const auto after = Snapshot(100, 0, {0, 0, 100, 0}, 0.05);
  StatsInterval interval = ComputeInterval(before, after, absl::Seconds(1));
  EXPECT_THAT(interval.p99_latency_seconds, DoubleNear(0.0001 + 0.0009 * 0.99, 1e-12));
}

TEST(ComputeInterval, AboveTheLastBoundIsThatBound) {
  const auto after = Snapshot(10, 0, {0, 0, 0, 10}, 50);
  StatsInterval interval =
      ComputeInterval(Snapshot(0, 0, {0, 0, 0, 0}, 0), after, absl::Seconds(1));
  EXPECT_DOUBLE_EQ(interval.p99_latency_seconds, 0.001);
}

TEST(ComputeInterval, NoRequestsMeansZeroLatency) {
  const auto same = Snapshot(5, 0, {5, 0, 0, 0}, 0.00001);
  StatsInterval interval = ComputeInterval(same, same, absl::Seconds(1));
  EXPECT_EQ(interval.read_iops, 0);
  EXPECT_EQ(interval.avg_latency_seconds, 0);
  EXPECT_EQ(interval.p99_latency_seconds, 0);
}

TEST(ComputeInterval, CountersThatWentBackwardsStartedAgainAtZero) {
  const auto before = Snapshot(5000, 0, {5000, 0, 0, 0}, 0.01);
  const auto after = Snapshot(300, 0, {300, 0, 0, 0}, 0.001);
  StatsInterval interval = ComputeInterval(before, after, absl::Seconds(1));
  EXPECT_DOUBLE_EQ(interval.read_iops, 300);
}

TEST(ComputeInterval, ThrottledRequestsPerSecondAndTheirAverageWait) {
  auto before = Snapshot(0, 0, {0, 0, 0, 0}, 0);
  before.set_throttled_requests(100);
  before.set_throttled_nanoseconds(1'000'000'000);
  auto after = Snapshot(400, 0, {400, 0, 0, 0}, 0.001);
  after.set_throttled_requests(300);
  after.set_throttled_nanoseconds(5'000'000'000);
  StatsInterval interval = ComputeInterval(before, after, absl::Seconds(2));
  EXPECT_DOUBLE_EQ(interval.throttled_per_second, 100);
  EXPECT_DOUBLE_EQ(interval.avg_throttle_wait_seconds, 0.02);
}

TEST(ComputeInterval, NothingThrottledMeansNoWait) {
  auto same = Snapshot(5, 0, {5, 0, 0, 0}, 0.00001);
  same.set_throttled_requests(7);
  same.set_throttled_nanoseconds(7000);
  StatsInterval interval = ComputeInterval(same, same, absl::Seconds(1));
  EXPECT_EQ(interval.throttled_per_second, 0);
  EXPECT_EQ(interval.avg_throttle_wait_seconds, 0);
}

TEST(RenderStatsLine, ShowsRatesMegabytesAndLatencyWithUnits) {
  StatsInterval interval;
  interval.read_iops = 1234.5;
  interval.read_bytes_per_second = 2 * 1024 * 1024;
  interval.avg_latency_seconds = 0.000120;
  interval.p99_latency_seconds = 0.0025;
  interval.inflight_ios = 32;
  interval.throttled_per_second = 480;
  interval.avg_throttle_wait_seconds = 0.0375;
  const std::string line = RenderStatsLine(interval, absl::Now());
  EXPECT_THAT(line, HasSubstr("1234.5"));
  EXPECT_THAT(line, HasSubstr("2.00"));
  EXPECT_THAT(line, HasSubstr("120us"));
  EXPECT_THAT(line, HasSubstr("2.5ms"));
  EXPECT_THAT(line, HasSubstr(" 32 "));
  EXPECT_THAT(line, HasSubstr(" 480.0 "));
  EXPECT_THAT(line, HasSubstr("37.5ms\n"));
}

TEST(RenderStatsJsonLine, CarriesTheThrottleFields) {
  StatsInterval interval;
  interval.throttled_per_second = 480;
  interval.avg_throttle_wait_seconds = 0.0375;
  const std::string line = RenderStatsJsonLine("v", interval, absl::Now());
  EXPECT_THAT(line, HasSubstr("\"throttledPerSecond\":480,"));
  EXPECT_THAT(line, HasSubstr("\"avgThrottleWaitSeconds\":0.0375}"));
}

}  // namespace
}  // namespace blk::cli
