// blk-csi's Mounter on a real loop device on the host: blkid, mkfs, mount(2),
// read-only binds, device node binds and the mount table; and the read-only
// loop device over it (read_only_block). Needs root and loop devices; skipped
// without them.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "csi/mounter.h"
#include "csi/read_only_block.h"
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
  EXPECT_TRUE(mounter_.Probe(device_)->empty());
  ASSERT_TRUE(mounter_.MakeFilesystem(device_, "ext4").ok());
  EXPECT_EQ(mounter_.Probe(device_)->type, "ext4");
  EXPECT_EQ(mounter_.Probe(device_)->Describe(), "ext4");

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

// Writes one aligned 4 KiB block at offset 0 through `node` with O_DIRECT; the errno, 0 on success.
int WriteDirect(const std::string& node, char fill) {
  const int fd = ::open(node.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return errno;
  void* buffer = nullptr;
  if (::posix_memalign(&buffer, 4096, 4096) != 0) return ENOMEM;
  std::memset(buffer, fill, 4096);
  const int err = ::pwrite(fd, buffer, 4096, 0) == 4096 ? 0 : errno;
  ::free(buffer);
  ::close(fd);
  return err;
}

char ReadFirstByte(const std::string& node) {
  char byte = 0;
  const int fd = ::open(node.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  if (::pread(fd, &byte, 1, 0) != 1) byte = 0;
  ::close(fd);
  return byte;
}

// A partitioned disk holds no file system blkid names, but it is not empty: NodeStage must
// see the partition table and never format it.
TEST_F(MounterTest, APartitionTableIsFoundOnADeviceWithoutAFileSystem) {
  // A DOS (MBR) table with one Linux partition from sector 2048 on, 16 MiB long.
  unsigned char mbr[512] = {};
  unsigned char* entry = mbr + 446;
  entry[4] = 0x83;
  const uint32_t first = 2048, sectors = 32768;
  std::memcpy(entry + 8, &first, sizeof(first));
  std::memcpy(entry + 12, &sectors, sizeof(sectors));
  mbr[510] = 0x55;
  mbr[511] = 0xaa;
  const int fd = ::open(device_.c_str(), O_WRONLY | O_DIRECT);
  ASSERT_GE(fd, 0);
  alignas(4096) static unsigned char block[4096];
  std::memcpy(block, mbr, sizeof(mbr));
  ASSERT_EQ(::pwrite(fd, block, sizeof(block), 0), static_cast<ssize_t>(sizeof(block)));
  ::close(fd);

  absl::StatusOr<DeviceContents> contents = mounter_.Probe(device_);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_FALSE(contents->empty());
  EXPECT_EQ(contents->type, "");
  EXPECT_EQ(contents->partition_table, "dos");
  EXPECT_EQ(contents->Describe(), "a dos partition table");
}

TEST_F(MounterTest, AReadOnlyLoopRefusesWritesTheDeviceStillTakes) {
  ASSERT_EQ(WriteDirect(device_, 'a'), 0);
  absl::StatusOr<std::string> loop = AttachReadOnlyLoop(device_);
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_EQ(ReadFirstByte(*loop), 'a');
  // Through a bind at a file, as a pod sees it.
  const std::string node = dir_ + "/node";
  ::close(::open(node.c_str(), O_CREAT | O_WRONLY, 0600));
  ASSERT_TRUE(mounter_.BindMount(*loop, node, /*read_only=*/true).ok());
  const int refused = WriteDirect(node, 'b');
  EXPECT_TRUE(refused == EROFS || refused == EPERM || refused == EACCES)
      << "a write through the read-only loop device: " << std::strerror(refused);
  EXPECT_EQ(WriteDirect(device_, 'c'), 0) << "the device itself stays writable";
  EXPECT_EQ(ReadFirstByte(node), 'c') << "direct I/O: the loop device reads the device's data";
  EXPECT_EQ(CommandOutput("cat /sys/block/" + loop->substr(5) + "/loop/dio"), "1");

  EXPECT_THAT(*OwnedLoopsOver(device_), ElementsAre(*loop));
  EXPECT_THAT(*mounter_.MountsOf(*loop, ""), ElementsAre(node));
  ASSERT_TRUE(mounter_.Unmount(node).ok());
  ASSERT_TRUE(DetachLoop(*loop).ok());
  EXPECT_TRUE(DetachLoop(*loop).ok()) << "detaching twice is fine";
  EXPECT_THAT(*OwnedLoopsOver(device_), IsEmpty());
}

TEST_F(MounterTest, ALoopDeviceNotMadeByBlkCsiIsNotOwned) {
  const std::string foreign = CommandOutput("losetup -f --show -r " + device_ + " 2>/dev/null");
  ASSERT_FALSE(foreign.empty());
  EXPECT_THAT(*OwnedLoopsOver(device_), IsEmpty());
  CommandOutput("losetup -d " + foreign);
}

}  // namespace
}  // namespace blk::csi
