#include "server/ublk/io_counters.h"

#include "gtest/gtest.h"

namespace blk::server {
namespace {

TEST(LatencyBucket, ABoundBelongsToItsOwnBucket) {
  EXPECT_EQ(LatencyBucket(0), 0);
  EXPECT_EQ(LatencyBucket(10'000), 0);
  EXPECT_EQ(LatencyBucket(10'001), 1);
  EXPECT_EQ(LatencyBucket(1'000'000), 6);
  EXPECT_EQ(LatencyBucket(10'000'000'000), kLatencyBuckets - 2);
}

TEST(LatencyBucket, AboveTheLastBoundIsTheOverflowBucket) {
  EXPECT_EQ(LatencyBucket(10'000'000'001), kLatencyBuckets - 1);
  EXPECT_EQ(LatencyBucket(UINT64_MAX), kLatencyBuckets - 1);
}

TEST(IoCounters, RecordCountsIosBytesErrorsAndLatency) {
  IoCounters counters;
  counters.Record(IoKind::kRead, 4096, 30'000);
  counters.Record(IoKind::kRead, -5, 2'000);
  counters.Record(IoKind::kWrite, 512, 20'000'000'000);
  const int read = static_cast<int>(IoKind::kRead);
  const int write = static_cast<int>(IoKind::kWrite);
  EXPECT_EQ(counters.ios[read].load(), 2u);
  EXPECT_EQ(counters.bytes[read].load(), 4096u);
  EXPECT_EQ(counters.errors[read].load(), 1u);
  EXPECT_EQ(counters.latency[read][0].load(), 1u);
  EXPECT_EQ(counters.latency[read][2].load(), 1u);
  EXPECT_EQ(counters.latency_sum_ns[read].load(), 32'000u);
  EXPECT_EQ(counters.latency[write][kLatencyBuckets - 1].load(), 1u);
  EXPECT_EQ(counters.bytes[write].load(), 512u);
}

}  // namespace
}  // namespace blk::server
