// blk-csi's Mounter on a real loop device on the host: blkid, mkfs, mount(2),
// read-only binds, device node binds and the mount table. Needs root and
// loop devices; skipped without them.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "csi/mounter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::csi {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

std::string CommandOutput(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[256];
  while (::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  if (::pclose(pipe) != 0) return "";
  while (!output.empty() && output.back() == '\n') output.pop_back();
  return output;
}

class MounterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (mount, losetup)";
    char dir_template[] = "/tmp/csi-mounter.XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    const std::string image = dir_ + "/image";
    const int fd = ::open(image.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 64 << 20), 0);
    ::close(fd);
    device_ = CommandOutput("losetup -f --show " + image + " 2>/dev/null");
    if (device_.empty()) GTEST_SKIP() << "no loop device";
  }

  void TearDown() override {
    for (const char* path : {"/ro", "/node", "/staging"}) ::umount2((dir_ + path).c_str(), 0);
    if (!device_.empty()) CommandOutput("losetup -d " + device_);
    if (!dir_.empty()) CommandOutput("rm -rf " + dir_);
  }

  Mounter mounter_;
  std::string dir_;
  std::string device_;
};

TEST_F(MounterTest, FormatsMountsBindsAndFindsEveryUse) {
  const std::string staging = dir_ + "/staging", ro = dir_ + "/ro", node = dir_ + "/node";
  EXPECT_EQ(*mounter_.FilesystemType(device_), "");
  ASSERT_TRUE(mounter_.MakeFilesystem(device_, "ext4").ok());
  EXPECT_EQ(*mounter_.FilesystemType(device_), "ext4");

  ASSERT_TRUE(mounter_.Mount(device_, staging, "ext4", {"noatime"}).ok());
  EXPECT_TRUE(*mounter_.IsMountPoint(staging));
  EXPECT_THAT(*mounter_.MountsOf(device_, ""), ElementsAre(staging));
  EXPECT_THAT(*mounter_.MountsOf(device_, staging), IsEmpty());

  ASSERT_EQ(::mkdir(ro.c_str(), 0755), 0);
  ASSERT_TRUE(mounter_.BindMount(staging, ro, /*read_only=*/true).ok());
  EXPECT_LT(::open((ro + "/file").c_str(), O_CREAT | O_WRONLY, 0644), 0)
      << "a read-only bind took a write";
  ::close(::open(node.c_str(), O_CREAT | O_WRONLY, 0600));
  ASSERT_TRUE(mounter_.BindMount(device_, node, /*read_only=*/false).ok());
  EXPECT_THAT(*mounter_.MountsOf(device_, staging), UnorderedElementsAre(ro, node));

  ASSERT_TRUE(mounter_.Unmount(ro).ok());
  ASSERT_TRUE(mounter_.Unmount(node).ok());
  EXPECT_TRUE(mounter_.Unmount(node).ok()) << "unmounting twice is fine";
  EXPECT_THAT(*mounter_.MountsOf(device_, staging), IsEmpty());
  ASSERT_TRUE(mounter_.Unmount(staging).ok());
  EXPECT_FALSE(*mounter_.IsMountPoint(staging));
  EXPECT_TRUE(mounter_.Unmount(dir_ + "/never-existed").ok());
}

}  // namespace
}  // namespace blk::csi
