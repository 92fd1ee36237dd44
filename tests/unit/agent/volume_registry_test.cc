#include "agent/volume_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/atomic_file.h"
#include "temp_dir.h"

namespace blk::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

v1::Volume FileVolume(const std::string& id) {
  v1::Volume volume;
  volume.set_id(id);
  volume.set_size_bytes(1 << 20);
  volume.set_logical_block_size(4096);
  volume.set_queues(2);
  volume.set_queue_depth(64);
  volume.mutable_file()->set_path("/var/tmp/" + id + ".img");
  return volume;
}

TEST(VolumeRegistryTest, SavedSpecsLoadBackInIdOrderWithoutStatus) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok()) << registry.status();
  v1::Volume b = FileVolume("b");
  b.mutable_status()->set_device_path("/dev/ublkb0");
  ASSERT_TRUE(registry->Save(b).ok());
  ASSERT_TRUE(registry->Save(FileVolume("a")).ok());

  VolumeRegistry::Loaded loaded = registry->LoadAll();
  EXPECT_THAT(loaded.problems, SizeIs(0));
  ASSERT_THAT(loaded.volumes, SizeIs(2));
  EXPECT_EQ(loaded.volumes[0].id(), "a");
  EXPECT_EQ(loaded.volumes[1].id(), "b");
  EXPECT_EQ(loaded.volumes[1].file().path(), "/var/tmp/b.img");
  EXPECT_EQ(loaded.volumes[1].queues(), 2u);
  EXPECT_FALSE(loaded.volumes[1].has_status());
}

TEST(VolumeRegistryTest, RemovedSpecIsGoneAndRemovingTwiceIsOk) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(registry->Save(FileVolume("a")).ok());
  ASSERT_TRUE(registry->Remove("a").ok());
  ASSERT_TRUE(registry->Remove("a").ok());
  EXPECT_THAT(registry->LoadAll().volumes, SizeIs(0));
}

TEST(VolumeRegistryTest, ATornRecordIsReportedAndTheOthersStillLoad) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(registry->Save(FileVolume("good")).ok());
  std::ofstream(registry->directory() + "/torn.json") << "{\"id\": \"to";
  // A temporary file from an interrupted write is ignored.
  std::ofstream(registry->directory() + "/good.json.tmp") << "garbage";

  VolumeRegistry::Loaded loaded = registry->LoadAll();
  ASSERT_THAT(loaded.volumes, SizeIs(1));
  EXPECT_EQ(loaded.volumes[0].id(), "good");
  ASSERT_THAT(loaded.problems, SizeIs(1));
  EXPECT_THAT(loaded.problems[0], HasSubstr("torn.json"));
}

TEST(VolumeRegistryTest, ARecordWhoseIdDoesNotMatchItsFileIsReported) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(registry->Save(FileVolume("a")).ok());
  std::filesystem::rename(registry->directory() + "/a.json", registry->directory() + "/b.json");
  VolumeRegistry::Loaded loaded = registry->LoadAll();
  EXPECT_THAT(loaded.volumes, SizeIs(0));
  EXPECT_THAT(loaded.problems, SizeIs(1));
}

TEST(AtomicFileTest, ReplacesContentsAndLeavesNoTemporaryFile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "two").ok());
  std::ifstream in(path);
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(contents, "two");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(AtomicFileTest, FailsClearlyInAMissingDirectory) {
  absl::Status status = WriteFileAtomically("/nonexistent-dir/f", "x");
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("/nonexistent-dir/f"));
}

}  // namespace
}  // namespace blk::agent
