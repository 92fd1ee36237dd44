#include "agent/volumes/spec_resolver.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/volumes/volume_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

namespace blk::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class SpecResolverTest : public ::testing::Test {
 protected:
  SpecResolver Resolver() {
    return SpecResolver(
        [this](const std::string& uri) -> absl::StatusOr<uint64_t> {
          probed_.push_back(uri);
          return export_size_;
        },
        [this](const std::string& path) -> absl::StatusOr<server::NvmeNamespaceInfo> {
          probed_.push_back(path);
          return server::NvmeNamespaceInfo{uint64_t{1} << 30, 4096, true};
        },
        [this](const v1::NvmeFabric& fabric, FabricNeed need) -> absl::StatusOr<FabricAttachment> {
          attached_.push_back(fabric.subsystem_nqn());
          EXPECT_EQ(need, FabricNeed::kEveryPath);
          if (!attach_error_.ok()) return attach_error_;
          return FabricAttachment{"/dev/ng7n2", {"127.0.0.1:4421"}};
        });
  }
  static v1::Volume Fabric(uint64_t size) {
    v1::Volume volume;
    volume.set_id("t1");
    volume.set_size_bytes(size);
    v1::NvmeFabric& fabric = *volume.mutable_nvme()->mutable_fabric();
    fabric.set_subsystem_nqn("nqn.2026-12.io.blk:array");
    fabric.set_nsid(2);
    fabric.add_paths("127.0.0.1:4420");
    fabric.add_paths("127.0.0.1:4421");
    // Output only: whatever a caller sends is replaced.
    fabric.add_agent_connected_paths("127.0.0.1:4420");
    volume.mutable_nvme()->set_path("/dev/ng0n1");
    return NormalizeVolumeSpec(volume);
  }
  static v1::Volume Nbd(uint64_t size = 0) {
    v1::Volume volume;
    volume.set_id("r1");
    volume.set_size_bytes(size);
    volume.mutable_nbd()->set_uri("nbd://127.0.0.1:10809/exp");
    return NormalizeVolumeSpec(volume);
  }
  static v1::Volume File(const std::string& path, uint64_t size) {
    v1::Volume volume;
    volume.set_id("f1");
    volume.set_size_bytes(size);
    volume.mutable_file()->set_path(path);
    return NormalizeVolumeSpec(volume);
  }
  static v1::Volume Nvme(uint64_t offset) {
    v1::Volume volume;
    volume.set_id("n1");
    volume.mutable_nvme()->set_path("/dev/ng0n1");
    volume.mutable_nvme()->set_offset_bytes(offset);
    return NormalizeVolumeSpec(volume);
  }

  uint64_t export_size_ = uint64_t{256} << 20;
  std::vector<std::string> probed_;
  std::vector<std::string> attached_;
  absl::Status attach_error_;
};

TEST_F(SpecResolverTest, AFabricVolumeIsServedFromTheHeadItsConnectFoundAndMarksWhatItConnected) {
  v1::Volume spec = Fabric(0);
  ASSERT_TRUE(Resolver().Resolve(spec, nullptr).ok());
  EXPECT_THAT(attached_, ElementsAre("nqn.2026-12.io.blk:array"));
  EXPECT_THAT(probed_, ElementsAre("/dev/ng7n2"));
  EXPECT_EQ(spec.nvme().path(), "/dev/ng7n2");
  EXPECT_THAT(spec.nvme().fabric().agent_connected_paths(), ElementsAre("127.0.0.1:4421"));
  EXPECT_EQ(spec.size_bytes(), uint64_t{1} << 30);
  EXPECT_EQ(spec.logical_block_size(), 4096u);
}

TEST_F(SpecResolverTest, AFabricVolumeThatCannotConnectIsRefusedWithTheConnectError) {
  attach_error_ = absl::UnavailableError("connecting to NVMe/TCP target 127.0.0.1:4421: refused");
  v1::Volume spec = Fabric(0);
  absl::Status resolved = Resolver().Resolve(spec, nullptr);
  EXPECT_EQ(resolved.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(resolved.message(), HasSubstr("127.0.0.1:4421"));
  EXPECT_THAT(probed_, IsEmpty());
}

TEST_F(SpecResolverTest, AnExistingFabricVolumeKeepsItsOutputsAndConnectsNothing) {
  v1::Volume existing = Fabric(uint64_t{1} << 30);
  existing.mutable_nvme()->set_path("/dev/ng7n2");
  existing.mutable_nvme()->mutable_fabric()->clear_agent_connected_paths();
  existing.mutable_nvme()->mutable_fabric()->add_agent_connected_paths("127.0.0.1:4421");
  v1::Volume spec = Fabric(0);
  ASSERT_TRUE(Resolver().Resolve(spec, &existing).ok());
  EXPECT_THAT(attached_, IsEmpty());
  EXPECT_EQ(spec.nvme().path(), "/dev/ng7n2");
  EXPECT_THAT(spec.nvme().fabric().agent_connected_paths(), ElementsAre("127.0.0.1:4421"));
}

TEST_F(SpecResolverTest, AnNbdSpecWithoutASizeTakesTheExports) {
  v1::Volume spec = Nbd();
  ASSERT_TRUE(Resolver().Resolve(spec, nullptr).ok());
  EXPECT_EQ(spec.size_bytes(), uint64_t{256} << 20);
  EXPECT_THAT(probed_, ElementsAre("nbd://127.0.0.1:10809/exp"));
}

TEST_F(SpecResolverTest, AnNbdSpecWithASizeIsNotProbed) {
  v1::Volume spec = Nbd(64 << 20);
  ASSERT_TRUE(Resolver().Resolve(spec, nullptr).ok());
  EXPECT_EQ(spec.size_bytes(), uint64_t{64} << 20);
  EXPECT_THAT(probed_, IsEmpty());
}

TEST_F(SpecResolverTest, AnExistingVolumeLendsItsValuesWithoutAProbe) {
  v1::Volume existing = Nbd(128 << 20);
  v1::Volume spec = Nbd();
  ASSERT_TRUE(Resolver().Resolve(spec, &existing).ok());
  EXPECT_EQ(spec.size_bytes(), uint64_t{128} << 20);

  v1::Volume nvme_existing = Nvme(0);
  nvme_existing.set_size_bytes(1 << 20);
  nvme_existing.set_logical_block_size(4096);
  v1::Volume nvme = Nvme(0);
  ASSERT_TRUE(Resolver().Resolve(nvme, &nvme_existing).ok());
  EXPECT_EQ(nvme.size_bytes(), uint64_t{1} << 20);
  EXPECT_EQ(nvme.logical_block_size(), 4096u);
  EXPECT_THAT(probed_, IsEmpty());
}

TEST_F(SpecResolverTest, AnNvmeSpecTakesTheNamespacesBlockSizeAndTheRestOfItsBytes) {
  v1::Volume spec = Nvme(256 << 20);
  ASSERT_TRUE(Resolver().Resolve(spec, nullptr).ok());
  EXPECT_EQ(spec.logical_block_size(), 4096u);
  EXPECT_EQ(spec.size_bytes(), uint64_t{768} << 20);
  EXPECT_THAT(probed_, ElementsAre("/dev/ng0n1"));
}

TEST_F(SpecResolverTest, AMinimumSizeTakesALargerExportsSizeAndKeepsItsOwnOverASmallerOne) {
  v1::Volume spec = Nbd(64 << 20);
  ASSERT_TRUE(Resolver().Resolve(spec, nullptr, /*size_is_minimum=*/true).ok());
  EXPECT_EQ(spec.size_bytes(), uint64_t{256} << 20);
  EXPECT_THAT(probed_, ElementsAre("nbd://127.0.0.1:10809/exp"));

  export_size_ = uint64_t{32} << 20;  // opening the volume refuses it later, naming both sizes
  spec = Nbd(64 << 20);
  ASSERT_TRUE(Resolver().Resolve(spec, nullptr, /*size_is_minimum=*/true).ok());
  EXPECT_EQ(spec.size_bytes(), uint64_t{64} << 20);
}

TEST_F(SpecResolverTest, AMinimumSizeTakesALargerFilesSizeRoundedToTheBlockSize) {
  blk::testing::TempDir dir;
  const std::string path = dir.path() + "/grown.img";
  { std::ofstream create(path); }
  std::filesystem::resize_file(path, (uint64_t{96} << 20) + 100);
  v1::Volume spec = File(path, 64 << 20);
  ASSERT_TRUE(Resolver().Resolve(spec, nullptr, /*size_is_minimum=*/true).ok());
  EXPECT_EQ(spec.size_bytes(), uint64_t{96} << 20);

  std::filesystem::resize_file(path, uint64_t{32} << 20);
  spec = File(path, 64 << 20);
  ASSERT_TRUE(Resolver().Resolve(spec, nullptr, /*size_is_minimum=*/true).ok());
  EXPECT_EQ(spec.size_bytes(), uint64_t{64} << 20);

  spec = File(dir.path() + "/missing.img", 64 << 20);  // created at the asked size
  ASSERT_TRUE(Resolver().Resolve(spec, nullptr, /*size_is_minimum=*/true).ok());
  EXPECT_EQ(spec.size_bytes(), uint64_t{64} << 20);

  spec = File(dir.path(), 64 << 20);
  absl::Status directory = Resolver().Resolve(spec, nullptr, /*size_is_minimum=*/true);
  EXPECT_EQ(directory.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(directory.message()), HasSubstr(dir.path()));
  EXPECT_THAT(probed_, IsEmpty());
}

TEST_F(SpecResolverTest, AnExistingVolumeAtLeastTheMinimumLendsItsSize) {
  v1::Volume existing = Nbd(128 << 20);
  v1::Volume spec = Nbd(64 << 20);
  ASSERT_TRUE(Resolver().Resolve(spec, &existing, /*size_is_minimum=*/true).ok());
  EXPECT_EQ(spec.size_bytes(), uint64_t{128} << 20);
  // Smaller than the minimum: the size stays, so the caller's comparison reports the difference.
  spec = Nbd(uint64_t{512} << 20);
  ASSERT_TRUE(Resolver().Resolve(spec, &existing, /*size_is_minimum=*/true).ok());
  EXPECT_EQ(spec.size_bytes(), uint64_t{512} << 20);
  EXPECT_THAT(probed_, IsEmpty());
}

TEST_F(SpecResolverTest, AResolvedSpecIsValidatedAgain) {
  export_size_ = 511;  // smaller than one block
  v1::Volume spec = Nbd();
  absl::Status resolved = Resolver().Resolve(spec, nullptr);
  EXPECT_EQ(resolved.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(resolved.message()), HasSubstr("nbd://127.0.0.1:10809/exp"));
}

}  // namespace
}  // namespace blk::agent
