#include "agent/volumes/fabric_paths.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kArray[] = "nqn.2026-12.io.blk:array";

v1::Volume Fabric(const std::string& id, const std::string& nqn,
                  const std::vector<std::string>& paths, const std::vector<std::string>& marked) {
  v1::Volume volume;
  volume.set_id(id);
  v1::NvmeFabric& fabric = *volume.mutable_nvme()->mutable_fabric();
  fabric.set_subsystem_nqn(nqn);
  fabric.set_nsid(1);
  for (const std::string& path : paths) fabric.add_paths(path);
  for (const std::string& path : marked) fabric.add_agent_connected_paths(path);
  return volume;
}

void Add(VolumeEntries& entries, const v1::Volume& volume) { entries[volume.id()].volume = volume; }

TEST(FabricPaths, ANewVolumeTakesOverTheMarksOfVolumesOnItsPathsOfTheSameSubsystem) {
  VolumeEntries entries;
  Add(entries, Fabric("a", kArray, {"10.0.0.1:4420", "10.0.0.2:4420"}, {"10.0.0.1:4420"}));
  Add(entries, Fabric("b", "nqn.2026-12.io.blk:other", {"10.0.0.2:4420"}, {"10.0.0.2:4420"}));
  v1::Volume spec = Fabric("c", kArray, {"10.0.0.1:4420", "10.0.0.2:4420"}, {});
  InheritConnectedPaths(spec, entries);
  EXPECT_THAT(spec.nvme().fabric().agent_connected_paths(), ElementsAre("10.0.0.1:4420"));
}

TEST(FabricPaths, OnlyMarkedPathsNoOtherVolumeUsesAreDisconnected) {
  VolumeEntries entries;
  Add(entries, Fabric("b", kArray, {"10.0.0.2:4420"}, {}));
  Add(entries, Fabric("c", "nqn.2026-12.io.blk:other", {"10.0.0.1:4420"}, {"10.0.0.1:4420"}));
  const v1::Volume deleted =
      Fabric("a", kArray, {"10.0.0.1:4420", "10.0.0.2:4420", "10.0.0.3:4420"},
             {"10.0.0.1:4420", "10.0.0.2:4420"});
  // 10.0.0.2 still serves b; 10.0.0.3 was never the agent's; c's path is another subsystem's.
  EXPECT_THAT(UnusedConnectedPaths(deleted, entries), ElementsAre("10.0.0.1:4420"));
  v1::Volume local;
  local.set_id("l");
  local.mutable_nvme()->set_path("/dev/ng0n1");
  EXPECT_THAT(UnusedConnectedPaths(local, entries), IsEmpty());
}

}  // namespace
}  // namespace blk::agent
