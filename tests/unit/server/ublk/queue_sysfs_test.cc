#include "server/ublk/queue_sysfs.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::server {
namespace {

using ::testing::HasSubstr;

// A stand-in for /sys/block/ublkbN/queue: regular files take and return what is written.
class QueueSysfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/blk-queue-sysfs-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    std::ofstream(dir_ + "/io_timeout") << "30000\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(QueueSysfsTest, WritesANumberAndReadsItBack) {
  ASSERT_TRUE(WriteQueueAttribute(dir_, "io_timeout", 2000).ok());
  absl::StatusOr<uint32_t> read = ReadQueueAttribute(dir_, "io_timeout");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, 2000u);
}

TEST_F(QueueSysfsTest, WritesAWordAsOneLine) {
  std::ofstream(dir_ + "/scheduler") << "[mq-deadline] none\n";
  ASSERT_TRUE(WriteQueueAttribute(dir_, "scheduler", "none").ok());
  std::string line;
  std::getline(std::ifstream(dir_ + "/scheduler"), line);
  EXPECT_EQ(line, "none");
}

TEST_F(QueueSysfsTest, AFileWithoutANumberIsDataLossNamingIt) {
  std::ofstream(dir_ + "/scheduler") << "[none] mq-deadline\n";
  absl::StatusOr<uint32_t> read = ReadQueueAttribute(dir_, "scheduler");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr(dir_ + "/scheduler"));
}

TEST_F(QueueSysfsTest, AMissingAttributeIsNotFoundNamingThePath) {
  absl::Status written = WriteQueueAttribute(dir_, "no_such_attribute", 1);
  EXPECT_EQ(written.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(written.message(), HasSubstr(dir_ + "/no_such_attribute"));
}

TEST(UblkQueueSysfsDir, NamesTheBlockDevicesQueue) {
  EXPECT_EQ(UblkQueueSysfsDir(7), "/sys/block/ublkb7/queue");
}

}  // namespace
}  // namespace blk::server
