#include "server/nbd/read_coverage.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace blk::server::nbd {
namespace {

using Claim = ReadCoverage::Claim;

TEST(ReadCoverageTest, InOrderChunksCoverTheRequest) {
  ReadCoverage coverage;
  EXPECT_TRUE(coverage.Covers(0));
  for (uint32_t at = 0; at < 4096; at += 512) EXPECT_EQ(coverage.Add(at, at + 512), Claim::kAdded);
  EXPECT_TRUE(coverage.Covers(4096));
  EXPECT_FALSE(coverage.Covers(8192));
  EXPECT_EQ(coverage.bytes(), 4096u);
}

TEST(ReadCoverageTest, ReverseOrderAndFillingGapsMerge) {
  ReadCoverage coverage;
  EXPECT_EQ(coverage.Add(6, 8), Claim::kAdded);
  EXPECT_EQ(coverage.Add(0, 2), Claim::kAdded);
  EXPECT_FALSE(coverage.Covers(8));
  EXPECT_EQ(coverage.Add(4, 6), Claim::kAdded);
  EXPECT_EQ(coverage.Add(2, 4), Claim::kAdded);
  EXPECT_TRUE(coverage.Covers(8));
}

TEST(ReadCoverageTest, AnyOverlapIsRefusedAndChangesNothing) {
  ReadCoverage coverage;
  ASSERT_EQ(coverage.Add(4, 8), Claim::kAdded);
  ASSERT_EQ(coverage.Add(12, 16), Claim::kAdded);
  EXPECT_EQ(coverage.Add(4, 8), Claim::kOverlap);   // the same bytes again
  EXPECT_EQ(coverage.Add(2, 5), Claim::kOverlap);   // into the start
  EXPECT_EQ(coverage.Add(7, 10), Claim::kOverlap);  // over the end
  EXPECT_EQ(coverage.Add(5, 6), Claim::kOverlap);   // inside
  EXPECT_EQ(coverage.Add(0, 20), Claim::kOverlap);  // around both
  EXPECT_EQ(coverage.Add(8, 13), Claim::kOverlap);  // from one into the next
  EXPECT_EQ(coverage.bytes(), 8u);
  EXPECT_EQ(coverage.Add(8, 12), Claim::kAdded);
  EXPECT_EQ(coverage.Add(0, 4), Claim::kAdded);
  EXPECT_TRUE(coverage.Covers(16));
}

TEST(ReadCoverageTest, OneMorePieceThanTheBoundIsRefused) {
  ReadCoverage coverage;
  for (uint32_t i = 0; i < ReadCoverage::kMaxRanges; ++i) {
    ASSERT_EQ(coverage.Add(2 * i, 2 * i + 1), Claim::kAdded);
  }
  EXPECT_EQ(coverage.Add(100, 101), Claim::kTooFragmented);
  // A chunk that touches a piece is no new piece: still accepted at the bound.
  EXPECT_EQ(coverage.Add(1, 2), Claim::kAdded);
  EXPECT_EQ(coverage.Add(100, 101), Claim::kAdded);
}

// Random chunkings of a request, in random order, with random stray chunks, against a byte map.
TEST(ReadCoverageTest, AgreesWithAByteMapOnRandomClaims) {
  std::mt19937 random(13);
  for (int round = 0; round < 2000; ++round) {
    const uint32_t length = 1 + random() % 64;
    std::vector<bool> covered(length, false);
    ReadCoverage coverage;
    for (int step = 0; step < 40; ++step) {
      const uint32_t begin = random() % length;
      const uint32_t end = begin + 1 + random() % (length - begin);
      bool overlaps = false;
      for (uint32_t i = begin; i < end; ++i) overlaps |= covered[i];
      const Claim claim = coverage.Add(begin, end);
      if (overlaps) {
        ASSERT_EQ(claim, Claim::kOverlap) << begin << "-" << end;
        continue;
      }
      if (claim == Claim::kTooFragmented) {
        size_t pieces = 0;
        for (uint32_t i = begin; i < end; ++i) covered[i] = true;
        for (uint32_t i = 0; i < length; ++i) pieces += covered[i] && (i == 0 || !covered[i - 1]);
        for (uint32_t i = begin; i < end; ++i) covered[i] = false;
        ASSERT_GT(pieces, ReadCoverage::kMaxRanges);
        continue;
      }
      ASSERT_EQ(claim, Claim::kAdded);
      for (uint32_t i = begin; i < end; ++i) covered[i] = true;
    }
    uint32_t bytes = 0;
    for (bool b : covered) bytes += b;
    EXPECT_EQ(coverage.bytes(), bytes);
    EXPECT_EQ(coverage.Covers(length), bytes == length);
  }
}

}  // namespace
}  // namespace blk::server::nbd
