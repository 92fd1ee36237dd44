#include "csi/read_only_block.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "csi/volume_capability.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::csi {
namespace {

using ::csi::v1::VolumeCapability;
using ::testing::UnorderedElementsAre;

MATCHER_P2(IsLoop, name, backing, "") { return arg.name == name && arg.backing_file == backing; }

TEST(LoopNameOfMountRootTest, OnlyALoopDeviceNodeRoot) {
  EXPECT_EQ(LoopNameOfMountRoot("/loop3"), "loop3");
  EXPECT_EQ(LoopNameOfMountRoot("/loop12"), "loop12");
  EXPECT_EQ(LoopNameOfMountRoot("/ublkb0"), "");
  EXPECT_EQ(LoopNameOfMountRoot("/loop"), "");
  EXPECT_EQ(LoopNameOfMountRoot("/loop-control"), "");
  EXPECT_EQ(LoopNameOfMountRoot("/loop3p1"), "");
  EXPECT_EQ(LoopNameOfMountRoot("/"), "");
  EXPECT_EQ(LoopNameOfMountRoot("/dir/loop3"), "");
}

// A /sys/block look-alike: bound loop devices have loop/backing_file, unbound ones do not.
TEST(ListBoundLoopsTest, ListsOnlyBoundLoopDevices) {
  char dir_template[] = "/tmp/csi-sysblock.XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::filesystem::path root = dir_template;
  auto add = [&](const std::string& name, const char* backing) {
    std::filesystem::create_directories(root / name / "loop");
    if (backing != nullptr) std::ofstream(root / name / "loop" / "backing_file") << backing << "\n";
  };
  add("loop0", "/dev/ublkb0");
  add("loop1", nullptr);  // unbound
  add("loop2", "/var/lib/images/a.img (deleted)");
  std::filesystem::create_directories(root / "ublkb0");
  std::filesystem::create_directories(root / "nvme0n1" / "loop");

  absl::StatusOr<std::vector<BoundLoop>> loops = ListBoundLoops(root.string());
  ASSERT_TRUE(loops.ok()) << loops.status();
  EXPECT_THAT(*loops, UnorderedElementsAre(IsLoop("loop0", "/dev/ublkb0"),
                                           IsLoop("loop2", "/var/lib/images/a.img (deleted)")));
  std::filesystem::remove_all(root);
}

TEST(ListBoundLoopsTest, AMissingTreeIsAnError) {
  absl::StatusOr<std::vector<BoundLoop>> loops = ListBoundLoops("/nonexistent/sys/block");
  EXPECT_EQ(loops.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(loops.status().message(), ::testing::HasSubstr("/nonexistent/sys/block"));
}

TEST(IsReaderOnlyTest, OnlyTheReaderOnlyModes) {
  VolumeCapability capability;
  capability.mutable_block();
  using Mode = VolumeCapability::AccessMode;
  for (Mode::Mode mode : {Mode::SINGLE_NODE_READER_ONLY, Mode::MULTI_NODE_READER_ONLY}) {
    capability.mutable_access_mode()->set_mode(mode);
    EXPECT_TRUE(IsReaderOnly(capability)) << Mode::Mode_Name(mode);
  }
  for (Mode::Mode mode : {Mode::UNKNOWN, Mode::SINGLE_NODE_WRITER, Mode::SINGLE_NODE_SINGLE_WRITER,
                          Mode::SINGLE_NODE_MULTI_WRITER, Mode::MULTI_NODE_SINGLE_WRITER}) {
    capability.mutable_access_mode()->set_mode(mode);
    EXPECT_FALSE(IsReaderOnly(capability)) << Mode::Mode_Name(mode);
  }
}

}  // namespace
}  // namespace blk::csi
