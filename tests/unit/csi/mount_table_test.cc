#include "csi/mount_table.h"

#include "gtest/gtest.h"

namespace blk::csi {
namespace {

TEST(MountTableTest, ParsesFileSystemsBindsAndEscapes) {
  const char text[] =
      "22 1 259:0 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw\n"
      "90 22 252:0 / /var/lib/kubelet/staging rw,noatime shared:50 - ext4 /dev/ublkb0 rw\n"
      "91 22 252:0 / /pods/a\\040b/mount ro,noatime shared:50 master:3 - ext4 /dev/ublkb0 rw\n"
      "92 22 0:5 /ublkb1 /pods/block/dev rw,nosuid - devtmpfs udev rw,size=1k\n";
  absl::StatusOr<std::vector<MountEntry>> table = ParseMountInfo(text);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->size(), 4u);
  EXPECT_EQ((*table)[1].major_minor, "252:0");
  EXPECT_EQ((*table)[1].mount_point, "/var/lib/kubelet/staging");
  EXPECT_FALSE((*table)[1].read_only);
  EXPECT_EQ((*table)[2].mount_point, "/pods/a b/mount");
  EXPECT_TRUE((*table)[2].read_only);
  EXPECT_EQ((*table)[2].fs_type, "ext4");
  EXPECT_EQ((*table)[2].source, "/dev/ublkb0");
  EXPECT_EQ((*table)[3].root, "/ublkb1");
  EXPECT_EQ((*table)[3].fs_type, "devtmpfs");
}

TEST(MountTableTest, RefusesATruncatedLine) {
  EXPECT_FALSE(ParseMountInfo("22 1 259:0 / / rw\n").ok());
}

TEST(MountTableTest, ReadsItsOwnTable) {
  absl::StatusOr<std::vector<MountEntry>> table = ReadMountTable();
  ASSERT_TRUE(table.ok()) << table.status();
  bool root = false;
  for (const MountEntry& entry : *table) root = root || entry.mount_point == "/";
  EXPECT_TRUE(root);
}

}  // namespace
}  // namespace blk::csi
