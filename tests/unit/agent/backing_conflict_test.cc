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

namespace blk::agent {
namespace {

using ::testing::HasSubstr;

v1::Volume FabricRange(const std::string& id, const std::string& nqn, uint32_t nsid,
                       uint64_t offset, uint64_t size) {
  v1::Volume volume;
  volume.set_id(id);
  volume.set_size_bytes(size);
  volume.mutable_nvme()->set_offset_bytes(offset);
  v1::NvmeFabric& fabric = *volume.mutable_nvme()->mutable_fabric();
  fabric.set_subsystem_nqn(nqn);
  fabric.set_nsid(nsid);
  fabric.add_paths("10.0.0.5:4420");
  return volume;
}

constexpr char kConflictNqn[] = "nqn.2014-08.org.example:array1";

TEST(BackingConflictTest, FabricVolumesOverlapOnOneSubsystemAndNsidWhateverTheirPaths) {
  v1::Volume a = FabricRange("a", kConflictNqn, 1, 0, 1 << 20);
  a.mutable_nvme()->set_path("/dev/ng3n1");
  const VolumeEntries entries = With({a, FabricRange("b", kConflictNqn, 1, 1 << 20, 1 << 20)});
  // Another spelling of the controllers, and no head found yet: still namespace 1 of array1.
  v1::Volume c = FabricRange("c", kConflictNqn, 1, 1536 << 10, 1 << 20);
  c.mutable_nvme()->mutable_fabric()->set_paths(0, "[fd00::5]:4420");
  absl::Status overlap = CheckBackingIsFree(c, entries);
  EXPECT_EQ(overlap.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(overlap.message()),
              HasSubstr("volume.nvme: bytes [1572864, 2621440) of namespace 1 of "
                        "nqn.2014-08.org.example:array1 overlap volume 'b' (bytes [1048576, "
                        "2097152) of namespace 1 of nqn.2014-08.org.example:array1)"));
  overlap = CheckBackingIsFree(FabricRange("c", kConflictNqn, 1, 512 << 10, 1 << 10), entries);
  EXPECT_THAT(std::string(overlap.message()), HasSubstr("overlap volume 'a'"));
  EXPECT_THAT(std::string(overlap.message()), HasSubstr("array1 (/dev/ng3n1))"));
  // Right after the last, another namespace, another subsystem: free.
  EXPECT_TRUE(
      CheckBackingIsFree(FabricRange("c", kConflictNqn, 1, 2 << 20, 1 << 20), entries).ok());
  EXPECT_TRUE(CheckBackingIsFree(FabricRange("c", kConflictNqn, 2, 0, 1 << 20), entries).ok());
  EXPECT_TRUE(
      CheckBackingIsFree(FabricRange("c", "nqn.2014-08.org.example:array2", 1, 0, 1 << 20), entries)
          .ok());
}

TEST(BackingConflictTest, AFabricVolumeGrowingCountsWithItsNewSize) {
  VolumeEntries entries = With({FabricRange("a", kConflictNqn, 1, 0, 1 << 20)});
  entries["a"].growing_to_bytes = 2 << 20;
  absl::Status overlap =
      CheckBackingIsFree(FabricRange("b", kConflictNqn, 1, 1 << 20, 1 << 20), entries);
  EXPECT_THAT(std::string(overlap.message()), HasSubstr(", growing)"));
  v1::Volume grown = FabricRange("b", kConflictNqn, 1, 4 << 20, 1 << 20);
  const VolumeEntries with_b = With({FabricRange("a", kConflictNqn, 1, 0, 1 << 20), grown});
  grown.set_size_bytes(4 << 20);
  grown.mutable_nvme()->set_offset_bytes(0);
  EXPECT_EQ(CheckGrowthIsFree(grown, with_b).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BackingConflictTest, AFabricAndALocalVolumeConflictOnlyThroughAKnownHead) {
  // The local volume is on the char device that is the fabric volume's multipath head.
  v1::Volume remote = FabricRange("remote", kConflictNqn, 1, 0, 1 << 20);
  remote.mutable_nvme()->set_path("/dev/ng0n1");
  absl::Status overlap = CheckBackingIsFree(Nvme("local", 0, 1 << 20), With({remote}));
  EXPECT_EQ(overlap.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(overlap.message()),
              HasSubstr("of /dev/ng0n1 overlap volume 'remote' (bytes [0, 1048576) of namespace 1 "
                        "of nqn.2014-08.org.example:array1 (/dev/ng0n1))"));
  overlap = CheckBackingIsFree(remote, With({Nvme("local", 0, 1 << 20)}));
  EXPECT_THAT(std::string(overlap.message()), HasSubstr("overlap volume 'local'"));
  // Disjoint bytes of the head, or a head not known yet (an empty path is no device): free.
  EXPECT_TRUE(CheckBackingIsFree(Nvme("local", 1 << 20, 1 << 20), With({remote})).ok());
  remote.mutable_nvme()->clear_path();
  EXPECT_TRUE(CheckBackingIsFree(Nvme("local", 0, 1 << 20), With({remote})).ok());
  EXPECT_TRUE(CheckBackingIsFree(remote, With({Nvme("local", 0, 1 << 20)})).ok());
}

}  // namespace
}  // namespace blk::agent
