#include "agent/volumes/volume_registry.h"

#include <filesystem>
#include <fstream>

#include "common/atomic_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

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
  ASSERT_THAT(loaded.records, SizeIs(2));
  EXPECT_EQ(loaded.records[0].spec.id(), "a");
  EXPECT_EQ(loaded.records[1].spec.id(), "b");
  EXPECT_EQ(loaded.records[1].spec.file().path(), "/var/tmp/b.img");
  EXPECT_EQ(loaded.records[1].spec.queues(), 2u);
  EXPECT_FALSE(loaded.records[1].spec.has_status());
}

TEST(VolumeRegistryTest, RemovedSpecIsGoneAndRemovingTwiceIsOk) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(registry->Save(FileVolume("a")).ok());
  ASSERT_TRUE(registry->Remove("a").ok());
  ASSERT_TRUE(registry->Remove("a").ok());
  EXPECT_THAT(registry->LoadAll().records, SizeIs(0));
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
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_EQ(loaded.records[0].spec.id(), "good");
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
  EXPECT_THAT(loaded.records, SizeIs(0));
  EXPECT_THAT(loaded.problems, SizeIs(1));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

TEST(VolumeRegistryTest, TheRecordKeepsTheDeviceId) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(registry->Save(FileVolume("a"), 5).ok());
  VolumeRegistry::Loaded loaded = registry->LoadAll();
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_EQ(loaded.records[0].device_id, 5);
  EXPECT_THAT(ReadAll(registry->directory() + "/a.json"),
              ::testing::StartsWith("blkagent-volume 3 "));
}

TEST(VolumeRegistryTest, AFormat1RecordFromAnOlderAgentStillLoadsWithoutADeviceId) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  WriteAll(registry->directory() + "/old.json",
           R"({"id": "old", "sizeBytes": "1048576", "null": {}})");
  VolumeRegistry::Loaded loaded = registry->LoadAll();
  EXPECT_THAT(loaded.problems, SizeIs(0));
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_EQ(loaded.records[0].spec.id(), "old");
  EXPECT_EQ(loaded.records[0].device_id, -1);
}

TEST(VolumeRegistryTest, ATruncatedRecordFallsBackToThePreviousVersion) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(registry->Save(FileVolume("a"), 1).ok());
  ASSERT_TRUE(registry->Save(FileVolume("a"), 2).ok());
  const std::string path = registry->directory() + "/a.json";
  const std::string full = ReadAll(path);
  WriteAll(path, full.substr(0, full.size() / 2));

  VolumeRegistry::Loaded loaded = registry->LoadAll();
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_EQ(loaded.records[0].spec.id(), "a");
  EXPECT_EQ(loaded.records[0].device_id, 1);
  ASSERT_THAT(loaded.problems, SizeIs(1));
  EXPECT_THAT(loaded.problems[0], HasSubstr("previous version"));
}

TEST(VolumeRegistryTest, AFlippedByteThatStillParsesIsCaughtByTheChecksum) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(registry->Save(FileVolume("a"), 1).ok());
  ASSERT_TRUE(registry->Save(FileVolume("a"), 2).ok());
  const std::string path = registry->directory() + "/a.json";
  std::string text = ReadAll(path);
  const size_t digit = text.find("1048576");
  ASSERT_NE(digit, std::string::npos);
  text[digit] = '2';  // 2048576: still valid JSON, still a valid spec
  WriteAll(path, text);

  VolumeRegistry::Loaded loaded = registry->LoadAll();
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_EQ(loaded.records[0].spec.size_bytes(), 1u << 20);
  ASSERT_THAT(loaded.problems, SizeIs(1));
  EXPECT_THAT(loaded.problems[0], HasSubstr("checksum"));
}

TEST(VolumeRegistryTest, ACorruptRecordNeverReplacesTheGoodPreviousVersion) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(registry->Save(FileVolume("a"), 1).ok());
  ASSERT_TRUE(registry->Save(FileVolume("a"), 2).ok());
  const std::string path = registry->directory() + "/a.json";
  WriteAll(path, "blkagent-volume 2 dev");
  ASSERT_TRUE(registry->Save(FileVolume("a"), 3).ok());
  WriteAll(path, "");
  VolumeRegistry::Loaded loaded = registry->LoadAll();
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_EQ(loaded.records[0].device_id, 1);
}

TEST(VolumeRegistryTest, ACorruptRecordWithoutAGoodPreviousIsReportedAndSkipped) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(registry->Save(FileVolume("a"), 1).ok());
  WriteAll(registry->directory() + "/a.json", "blkagent-volume 2 device=1 fnv1a64=0\n{}");
  VolumeRegistry::Loaded loaded = registry->LoadAll();
  EXPECT_THAT(loaded.records, SizeIs(0));
  ASSERT_THAT(loaded.problems, SizeIs(1));
  EXPECT_THAT(loaded.problems[0], HasSubstr("a.json"));
}

TEST(VolumeRegistryTest, ARecordFromANewerFormatIsReportedNotMisread) {
  EXPECT_EQ(DecodeVolumeRecord("blkagent-volume 4 device=1 fnv1a64=0\n{}", "a").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(VolumeRegistryTest, AFormat2RecordFromAnOlderAgentStillLoadsWithoutTunables) {
  // Format 2 is format 3's layout with a spec that has neither rq_affinity nor placement.
  std::string text = EncodeVolumeRecord({FileVolume("a"), 4});
  ASSERT_EQ(text.rfind("blkagent-volume 3 ", 0), 0u);
  text[16] = '2';
  absl::StatusOr<VolumeRegistry::Record> decoded = DecodeVolumeRecord(text, "a");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->device_id, 4);
  EXPECT_EQ(decoded->spec.queues(), 2u);
  EXPECT_FALSE(decoded->spec.has_rq_affinity());
  EXPECT_EQ(decoded->spec.placement(), "");
}

TEST(VolumeRegistryTest, TunablesAreKeptIncludingAnRqAffinityOfZero) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  v1::Volume zero = FileVolume("zero");
  zero.set_rq_affinity(0);
  zero.set_placement("0-1");
  ASSERT_TRUE(registry->Save(zero, 1).ok());
  v1::Volume unset = FileVolume("unset");
  ASSERT_TRUE(registry->Save(unset, 2).ok());

  VolumeRegistry::Loaded loaded = registry->LoadAll();
  ASSERT_THAT(loaded.records, SizeIs(2));
  const v1::Volume& unset_loaded = loaded.records[0].spec;
  const v1::Volume& zero_loaded = loaded.records[1].spec;
  EXPECT_FALSE(unset_loaded.has_rq_affinity());
  ASSERT_TRUE(zero_loaded.has_rq_affinity());
  EXPECT_EQ(zero_loaded.rq_affinity(), 0u);
  EXPECT_EQ(zero_loaded.placement(), "0-1");
}

TEST(VolumeRegistryTest, EncodedRecordsDecodeToThemselves) {
  VolumeRegistry::Record record{FileVolume("a"), 9};
  auto decoded = DecodeVolumeRecord(EncodeVolumeRecord(record), "a");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->device_id, 9);
  EXPECT_EQ(decoded->spec.file().path(), "/var/tmp/a.img");
}

TEST(VolumeRegistryTest, RemoveAlsoRemovesThePreviousVersion) {
  testing::TempDir dir;
  auto registry = VolumeRegistry::Open(dir.path());
  ASSERT_TRUE(registry.ok());
  ASSERT_TRUE(registry->Save(FileVolume("a"), 1).ok());
  ASSERT_TRUE(registry->Save(FileVolume("a"), 2).ok());
  ASSERT_TRUE(std::filesystem::exists(registry->directory() + "/a.json.prev"));
  ASSERT_TRUE(registry->Remove("a").ok());
  EXPECT_FALSE(std::filesystem::exists(registry->directory() + "/a.json.prev"));
  EXPECT_THAT(registry->LoadAll().records, SizeIs(0));
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
