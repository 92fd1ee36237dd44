#include "server/ublk/opener.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::server {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kMountinfo[] =
    "22 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw\n"
    "35 22 259:0 / /mnt/data rw,relatime shared:20 - xfs /dev/ublkb0 rw\n"
    "36 22 259:0 /sub /srv/with\\040space rw - xfs /dev/ublkb0 rw\n"
    "37 22 259:1 / /mnt/other rw - xfs /dev/ublkb1 rw\n";

TEST(MountPointsOf, FindsEveryMountOfTheDevice) {
  EXPECT_THAT(MountPointsOf(kMountinfo, 259, 0), ElementsAre("/mnt/data", "/srv/with space"));
}

TEST(MountPointsOf, IgnoresOtherDevicesAndMinorsThatShareAPrefix) {
  EXPECT_THAT(MountPointsOf(kMountinfo, 259, 1), ElementsAre("/mnt/other"));
  EXPECT_THAT(MountPointsOf(kMountinfo, 25, 9), IsEmpty());
  EXPECT_THAT(MountPointsOf("", 259, 0), IsEmpty());
}

class FindOpenersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("opener_test." + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "proc");
    fs::create_directories(root_ / "sys/block/ublkb0/holders");
    std::ofstream(root_ / "mountinfo") << kMountinfo;
    sources_.proc = (root_ / "proc").string();
    sources_.sys_block = (root_ / "sys/block").string();
    sources_.mountinfo = (root_ / "mountinfo").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  void AddProcess(const std::string& pid, const std::string& comm, const fs::path& opened) {
    fs::create_directories(root_ / "proc" / pid / "fd");
    std::ofstream(root_ / "proc" / pid / "comm") << comm << "\n";
    fs::create_symlink(opened, root_ / "proc" / pid / "fd" / "3");
  }

  fs::path root_;
  OpenerSources sources_;
};

TEST_F(FindOpenersTest, NamesAProcessHoldingTheDeviceByPidAndCommand) {
  // A character device stands in for the block device: the fd scan compares type and numbers.
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  AddProcess("4242", "fio", "/dev/null");
  AddProcess("4343", "bash", "/");
  DeviceNumber null_device{::major(st.st_rdev), ::minor(st.st_rdev), /*block=*/false};
  EXPECT_THAT(FindOpeners(null_device, "ublkb7", sources_), ElementsAre("pid 4242 (fio)"));
}

TEST_F(FindOpenersTest, SameNumbersOfTheOtherDeviceTypeAreNotAnOpener) {
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  AddProcess("4242", "fio", "/dev/null");
  DeviceNumber block_with_same_numbers{::major(st.st_rdev), ::minor(st.st_rdev), true};
  EXPECT_THAT(FindOpeners(block_with_same_numbers, "ublkb7", sources_), IsEmpty());
}

TEST_F(FindOpenersTest, NamesHoldersAndMountPoints) {
  fs::create_directories(root_ / "sys/block/ublkb0/holders/dm-3");
  EXPECT_THAT(FindOpeners(DeviceNumber{259, 0, true}, "ublkb0", sources_),
              ElementsAre("holder dm-3", "mounted at /mnt/data", "mounted at /srv/with space"));
}

TEST_F(FindOpenersTest, AnUnusedDeviceHasNoOpeners) {
  EXPECT_THAT(FindOpeners(DeviceNumber{259, 5, true}, "ublkb5", sources_), IsEmpty());
}

}  // namespace
}  // namespace blk::server
