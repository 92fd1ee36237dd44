// Device creation on a machine without ublk: what must hold before and without the kernel.
#include "server/ublk/device.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace blk::server {
namespace {

namespace fs = std::filesystem;

class DeviceCreateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (fs::exists("/dev/ublk-control")) GTEST_SKIP() << "this machine has ublk";
    dir_ = fs::temp_directory_path() / ("device_test." + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    config_.size_bytes = 8 << 20;
    config_.backend = FileBackendConfig{(dir_ / "volume.img").string()};
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  DeviceConfig config_;
};

TEST_F(DeviceCreateTest, WithoutUblkFailsNamingTheControlDeviceAndLeavesNoFileBehind) {
  absl::StatusOr<std::unique_ptr<Device>> device = Device::Create(config_);
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.status().message().find("/dev/ublk-control"), absl::string_view::npos)
      << device.status();
  EXPECT_FALSE(fs::exists(dir_ / "volume.img"));
}

TEST_F(DeviceCreateTest, AnExistingFileIsKeptWhenCreationFails) {
  { std::ofstream(dir_ / "volume.img") << std::string(8 << 20, 'k'); }
  ASSERT_FALSE(Device::Create(config_).ok());
  EXPECT_EQ(fs::file_size(dir_ / "volume.img"), 8u << 20);
}

TEST_F(DeviceCreateTest, ATooSmallBackingFileIsRejectedBeforeTheKernelIsAsked) {
  { std::ofstream(dir_ / "volume.img") << "small"; }
  absl::StatusOr<std::unique_ptr<Device>> device = Device::Create(config_);
  ASSERT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument) << device.status();
  EXPECT_NE(device.status().message().find("volume.img"), absl::string_view::npos);
}

TEST_F(DeviceCreateTest, ABadConfigIsRejectedBeforeTheBackendIsTouched) {
  config_.logical_block_size = 777;
  absl::StatusOr<std::unique_ptr<Device>> device = Device::Create(config_);
  ASSERT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ / "volume.img"));
}

}  // namespace
}  // namespace blk::server
