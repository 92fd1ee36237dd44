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
    // The agent is pid 1 of the fake tree, in the host's PID namespace and mount namespace "a".
    AddProcess("1", "blkagent", "/");
    InMountNamespace("1", "a", kMountinfo);
    fs::create_directory_symlink("1", root_ / "proc/self");
    std::ofstream(root_ / "proc/1/ns/pid") << "";
    struct stat pid_ns {};
    ASSERT_EQ(::stat((root_ / "proc/1/ns/pid").c_str(), &pid_ns), 0);
    sources_.proc = (root_ / "proc").string();
    sources_.sys_block = (root_ / "sys/block").string();
    sources_.host_pid_namespace_inode = pid_ns.st_ino;
  }
  void TearDown() override { fs::remove_all(root_); }

  void AddProcess(const std::string& pid, const std::string& comm, const fs::path& opened) {
    fs::create_directories(root_ / "proc" / pid / "fd");
    std::ofstream(root_ / "proc" / pid / "comm") << comm << "\n";
    fs::create_symlink(opened, root_ / "proc" / pid / "fd" / "3");
  }

  // The process sees `mountinfo` in the mount namespace named `ns` (a file its ns/mnt links to).
  void InMountNamespace(const std::string& pid, const std::string& ns,
                        const std::string& mountinfo) {
    fs::create_directories(root_ / "proc" / pid / "ns");
    fs::create_directories(root_ / "namespaces");
    std::ofstream(root_ / "namespaces" / ns, std::ios::app) << "";
    fs::create_symlink(root_ / "namespaces" / ns, root_ / "proc" / pid / "ns/mnt");
    std::ofstream(root_ / "proc" / pid / "mountinfo") << mountinfo;
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
  EXPECT_THAT(FindOpeners(null_device, "ublkb7", sources_).found, ElementsAre("pid 4242 (fio)"));
}

TEST_F(FindOpenersTest, SameNumbersOfTheOtherDeviceTypeAreNotAnOpener) {
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  AddProcess("4242", "fio", "/dev/null");
  DeviceNumber block_with_same_numbers{::major(st.st_rdev), ::minor(st.st_rdev), true};
  EXPECT_THAT(FindOpeners(block_with_same_numbers, "ublkb7", sources_).found, IsEmpty());
}

TEST_F(FindOpenersTest, NamesHoldersAndMountPoints) {
  fs::create_directories(root_ / "sys/block/ublkb0/holders/dm-3");
  EXPECT_THAT(FindOpeners(DeviceNumber{259, 0, true}, "ublkb0", sources_).found,
              ElementsAre("holder dm-3", "mounted at /mnt/data", "mounted at /srv/with space"));
}

TEST_F(FindOpenersTest, AnUnusedDeviceHasNoOpeners) {
  const Openers openers = FindOpeners(DeviceNumber{259, 5, true}, "ublkb5", sources_);
  EXPECT_THAT(openers.found, IsEmpty());
  EXPECT_EQ(openers.blind_spot, "");
}

TEST_F(FindOpenersTest, AMountInAnotherMountNamespaceIsFoundOnceAndNamesAProcessInIt) {
  const std::string theirs = "40 30 259:0 / /var/lib/kubelet/pods/x rw - ext4 /dev/ublkb0 rw\n";
  AddProcess("77", "sleep", "/");
  InMountNamespace("77", "b", theirs);
  AddProcess("78", "sh", "/");
  InMountNamespace("78", "b", theirs);
  EXPECT_THAT(FindOpeners(DeviceNumber{259, 0, true}, "ublkb0", sources_).found,
              ElementsAre("mounted at /mnt/data", "mounted at /srv/with space",
                          "mounted at /var/lib/kubelet/pods/x in the mount namespace of pid 77 "
                          "(sleep)"));
}

TEST_F(FindOpenersTest, OutsideTheHostsPidNamespaceTheScanSaysItIsBlind) {
  sources_.host_pid_namespace_inode = 1;
  const Openers openers = FindOpeners(DeviceNumber{259, 5, true}, "ublkb5", sources_);
  EXPECT_THAT(openers.found, IsEmpty());
  EXPECT_THAT(openers.blind_spot, ::testing::HasSubstr("hostPID"));
}

}  // namespace
}  // namespace blk::server
