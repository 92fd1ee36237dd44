#include "agent/volumes/backing_conflict.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

namespace blk::agent {
namespace {

using ::testing::HasSubstr;

v1::Volume File(const std::string& id, const std::string& path) {
  v1::Volume volume;
  volume.set_id(id);
  volume.set_size_bytes(1 << 20);
  volume.mutable_file()->set_path(path);
  return volume;
}

v1::Volume Nvme(const std::string& id, uint64_t offset, uint64_t size) {
  v1::Volume volume;
  volume.set_id(id);
  volume.set_size_bytes(size);
  volume.mutable_nvme()->set_path("/dev/ng0n1");
  volume.mutable_nvme()->set_offset_bytes(offset);
  return volume;
}

VolumeEntries With(std::initializer_list<v1::Volume> volumes) {
  VolumeEntries entries;
  for (const v1::Volume& volume : volumes) entries[volume.id()].volume = volume;
  return entries;
}

TEST(BackingConflictTest, TwoFileVolumesCannotShareAPath) {
  const VolumeEntries entries = With({File("a", "/img/a"), File("b", "/img/b")});
  absl::Status shared = CheckBackingIsFree(File("c", "/img/b"), entries);
  EXPECT_EQ(shared.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(shared.message()), HasSubstr("volume.file.path"));
  EXPECT_THAT(std::string(shared.message()), HasSubstr("'b'"));
  EXPECT_TRUE(CheckBackingIsFree(File("c", "/img/c"), entries).ok());
}

TEST(BackingConflictTest, OneFileUnderAnotherNameIsTheSameBacking) {
  const blk::testing::TempDir dir;
  const std::string image = dir.path() + "/image";
  std::ofstream(image) << "data";
  std::filesystem::create_directory(dir.path() + "/sub");
  std::filesystem::create_symlink(image, dir.path() + "/link");
  std::filesystem::create_hard_link(image, dir.path() + "/hard");
  const VolumeEntries entries = With({File("a", image)});
  for (const std::string& alias :
       {dir.path() + "/link", dir.path() + "/hard", dir.path() + "/sub/../image"}) {
    absl::Status shared = CheckBackingIsFree(File("b", alias), entries);
    EXPECT_EQ(shared.code(), absl::StatusCode::kFailedPrecondition) << alias;
    EXPECT_THAT(std::string(shared.message()), HasSubstr("used by volume 'a' (as '" + image));
  }
  // Another file, and one that does not exist yet, are free.
  std::ofstream(dir.path() + "/other") << "data";
  EXPECT_TRUE(CheckBackingIsFree(File("b", dir.path() + "/other"), entries).ok());
  EXPECT_TRUE(CheckBackingIsFree(File("b", dir.path() + "/new"), entries).ok());
}

TEST(BackingConflictTest, NvmeVolumesMayNotOverlapOnANamespace) {
  const VolumeEntries entries = With({Nvme("a", 0, 1 << 20), Nvme("b", 1 << 20, 1 << 20)});
  absl::Status overlap = CheckBackingIsFree(Nvme("c", 1536 << 10, 1 << 20), entries);
  EXPECT_EQ(overlap.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(overlap.message()), HasSubstr("overlap volume 'b'"));
  EXPECT_TRUE(CheckBackingIsFree(Nvme("c", 2 << 20, 1 << 20), entries).ok());
}

TEST(BackingConflictTest, NullAndNbdVolumesNeverConflict) {
  v1::Volume null_volume;
  null_volume.set_id("n");
  null_volume.mutable_null();
  v1::Volume nbd;
  nbd.set_id("r");
  nbd.mutable_nbd()->set_uri("nbd://127.0.0.1/exp");
  const VolumeEntries entries = With({null_volume, nbd});
  null_volume.set_id("n2");
  nbd.set_id("r2");
  EXPECT_TRUE(CheckBackingIsFree(null_volume, entries).ok());
  EXPECT_TRUE(CheckBackingIsFree(nbd, entries).ok());
}

}  // namespace
}  // namespace blk::agent
