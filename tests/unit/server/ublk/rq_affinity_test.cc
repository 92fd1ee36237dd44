#include "server/ublk/rq_affinity.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::server {
namespace {

using ::testing::HasSubstr;

// A stand-in for /sys/block/ublkbN/queue: a regular file takes and returns what is written.
class RqAffinityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/blk-rq-affinity-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    std::ofstream(dir_ + "/rq_affinity") << "1\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RqAffinityTest, WritesAndReadsBackEachValue) {
  for (uint32_t value : {0u, 1u, 2u}) {
    ASSERT_TRUE(WriteRqAffinity(dir_, value).ok());
    absl::StatusOr<uint32_t> read = ReadRqAffinity(dir_);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(*read, value);
  }
}

TEST_F(RqAffinityTest, RefusesValuesAboveTwoWithoutWriting) {
  absl::Status written = WriteRqAffinity(dir_, 3);
  EXPECT_EQ(written.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(written.message(), HasSubstr("0, 1 or 2, got 3"));
  EXPECT_EQ(*ReadRqAffinity(dir_), 1u);
}

TEST_F(RqAffinityTest, AMissingDeviceIsNotFoundNamingThePath) {
  const std::string gone = dir_ + "/no-such-disk/queue";
  EXPECT_EQ(WriteRqAffinity(gone, 1).code(), absl::StatusCode::kNotFound);
  absl::StatusOr<uint32_t> read = ReadRqAffinity(gone);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr(gone + "/rq_affinity"));
}

}  // namespace
}  // namespace blk::server
