#include "csi/node_service.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/time/time.h"
#include "client/agent_address.h"
#include "client/volume_client.h"
#include "csi/mounter.h"
#include "csi/provisioned_volumes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/cli/fake_agent.h"

namespace blk::csi {
namespace {

using ::csi::v1::VolumeCapability;
using ::testing::HasSubstr;
using ::testing::Not;

// No agent listens here: a request that passes the checks fails reaching it, UNAVAILABLE.
class NodeServiceTest : public ::testing::Test {
 protected:
  NodeServiceTest()
      : agent_(blk::client::UnixAgentAddress("/nonexistent/blkagent.sock"), absl::Seconds(5)),
        node_("node-1", "blk.csi.storage/node", agent_, mounter_, paths_) {}

  static VolumeCapability MountCapability(const std::string& fs_type = "") {
    VolumeCapability capability;
    capability.mutable_mount()->set_fs_type(fs_type);
    capability.mutable_access_mode()->set_mode(VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    return capability;
  }

  static ::csi::v1::NodeStageVolumeRequest StageRequest() {
    ::csi::v1::NodeStageVolumeRequest request;
    request.set_volume_id("pvc-1");
    request.set_staging_target_path("/var/lib/kubelet/staging/pvc-1");
    *request.mutable_volume_capability() = MountCapability();
    (*request.mutable_volume_context())["backend"] = "null://";
    (*request.mutable_volume_context())["size"] = "64Mi";
    return request;
  }

  static ::csi::v1::NodePublishVolumeRequest PublishRequest() {
    ::csi::v1::NodePublishVolumeRequest request;
    request.set_volume_id("pvc-1");
    request.set_staging_target_path("/var/lib/kubelet/staging/pvc-1");
    request.set_target_path("/var/lib/kubelet/pods/p/volumes/pvc-1/mount");
    *request.mutable_volume_capability() = MountCapability();
    return request;
  }

  grpc::Status Stage(const ::csi::v1::NodeStageVolumeRequest& request) {
    ::csi::v1::NodeStageVolumeResponse response;
    return node_.NodeStageVolume(nullptr, &request, &response);
  }
  grpc::Status Publish(const ::csi::v1::NodePublishVolumeRequest& request) {
    ::csi::v1::NodePublishVolumeResponse response;
    return node_.NodePublishVolume(nullptr, &request, &response);
  }

  static void ExpectInvalid(const grpc::Status& status, const std::string& message) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(message));
  }

  blk::client::VolumeClient agent_;
  Mounter mounter_;
  const KubeletPaths paths_{"/var/lib/kubelet"};
  NodeService node_;
};

TEST_F(NodeServiceTest, AValidStageGoesOnToTheAgent) {
  EXPECT_EQ(Stage(StageRequest()).error_code(), grpc::StatusCode::UNAVAILABLE);
}

// A node staging file volumes against a fake agent, in a directory of its own.
class NodeServiceStage : public ::testing::Test {
 protected:
  ::csi::v1::NodeStageVolumeRequest BlockStageRequest() const {
    ::csi::v1::NodeStageVolumeRequest request;
    request.set_volume_id("pvc-1");
    request.set_staging_target_path(agent_.dir() + "/staging");
    request.mutable_volume_capability()->mutable_block();
    request.mutable_volume_capability()->mutable_access_mode()->set_mode(
        VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    (*request.mutable_volume_context())["backend"] = "file://" + image();
    (*request.mutable_volume_context())["size"] = "64Mi";
    return request;
  }
  std::string image() const { return agent_.dir() + "/pvc-1.img"; }
  grpc::Status Stage(const ::csi::v1::NodeStageVolumeRequest& request) {
    ::csi::v1::NodeStageVolumeResponse response;
    return node_.NodeStageVolume(nullptr, &request, &response);
  }

  blk::cli::testing::FakeAgent agent_;
  blk::client::VolumeClient client_{blk::client::UnixAgentAddress(agent_.socket_path()),
                                    absl::Seconds(5)};
  Mounter mounter_;
  const KubeletPaths paths_{agent_.dir()};
  NodeService node_{"node-1", "blk.csi.storage/node", client_, mounter_, paths_};
};

// Kubernetes keeps the provisioned size in the volume context after NodeExpandVolume: the agent
// is told it is a floor, so a restage takes the backing's grown size.
TEST_F(NodeServiceStage, AsksTheAgentForAtLeastTheContextsSize) {
  std::ofstream(image()).put('x');
  grpc::Status staged = Stage(BlockStageRequest());
  ASSERT_TRUE(staged.ok()) << staged.error_message();
  const blk::v1::CreateVolumeRequest create = agent_.service().last_create();
  EXPECT_TRUE(create.size_is_minimum());
  EXPECT_EQ(create.volume().size_bytes(), uint64_t{64} << 20);
}

// A ControllerModifyVolume (the controller in this process) changed the limits after the
// volume's context was made: a stage takes the record's limits over the context's.
TEST_F(NodeServiceStage, TakesTheLimitsTheControllerModifiedOverTheContexts) {
  const ProvisionedVolumes records(agent_.dir() + "/records");
  ASSERT_TRUE(records.Open().ok());
  ProvisionedVolume recorded;
  recorded.set_volume_id("pvc-1");
  (*recorded.mutable_modified_limits())["iops"] = "700";
  ASSERT_TRUE(records.Save(recorded).ok());
  NodeService node("node-1", "blk.csi.storage/node", client_, mounter_, paths_, records);
  ::csi::v1::NodeStageVolumeRequest request = BlockStageRequest();
  (*request.mutable_volume_context())["iops"] = "100";
  (*request.mutable_volume_context())["readBps"] = "1Mi";
  std::ofstream(image()).put('x');
  ::csi::v1::NodeStageVolumeResponse response;
  grpc::Status staged = node.NodeStageVolume(nullptr, &request, &response);
  ASSERT_TRUE(staged.ok()) << staged.error_message();
  const blk::v1::CreateVolumeRequest create = agent_.service().last_create();
  const blk::v1::VolumeLimits& limits = create.volume().limits();
  EXPECT_EQ(limits.total_iops().rate(), 700u);
  EXPECT_EQ(limits.read_bytes_per_second().rate(), uint64_t{1} << 20);
}

// After a reboot the pool's file system may not be mounted yet: the agent must not be asked to
// create the volume (it would make an empty file where the data should be).
TEST_F(NodeServiceStage, AMissingBackingFileIsNotCreated) {
  grpc::Status staged = Stage(BlockStageRequest());
  EXPECT_EQ(staged.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << staged.error_message();
  EXPECT_THAT(staged.error_message(), HasSubstr(image() + " is missing"));
  EXPECT_FALSE(agent_.service().last_create().has_volume());
  EXPECT_FALSE(std::filesystem::exists(image()));
}

TEST_F(NodeServiceStage, DeletingAnAgentVolumeThatIsGoneAlreadyIsDone) {
  blk::v1::CreateVolumeRequest create;
  create.mutable_volume()->set_id("busy");
  ASSERT_TRUE(client_.CreateVolume(create).ok());
  create.mutable_volume()->set_id("v1");
  ASSERT_TRUE(client_.CreateVolume(create).ok());

  EXPECT_TRUE(DeleteAgentVolume(client_, "v1").ok());
  blk::v1::GetVolumeRequest get;
  get.set_id("v1");
  EXPECT_EQ(client_.GetVolume(get).status().code(), absl::StatusCode::kNotFound);
  // Deleted already (the agent answers NOT_FOUND): done, as often as asked.
  EXPECT_TRUE(DeleteAgentVolume(client_, "v1").ok());
  EXPECT_TRUE(DeleteAgentVolume(client_, "never-existed").ok());
  // Any other refusal is not: an open device stays (never forced).
  absl::Status busy = DeleteAgentVolume(client_, "busy");
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition) << busy;
  EXPECT_FALSE(agent_.service().last_delete().force());
}

// A stage that fails after creating the agent volume deletes it again; when someone else deleted
// it meanwhile, nothing stays, and the answer must not say otherwise.
TEST_F(NodeServiceStage, AFailedStageWhoseAgentVolumeIsGoneAlreadyLeavesNothing) {
  std::ofstream(image()).put('x');
  std::ofstream(agent_.dir() + "/not-a-directory").put('x');
  ::csi::v1::NodeStageVolumeRequest request = BlockStageRequest();
  request.set_staging_target_path(agent_.dir() + "/not-a-directory/staging");
  request.mutable_volume_capability()->mutable_mount();
  agent_.service().FailMethodWith(
      "DeleteVolume", grpc::Status(grpc::StatusCode::NOT_FOUND, "volume 'pvc-1' does not exist"));
  grpc::Status staged = Stage(request);
  EXPECT_EQ(staged.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << staged.error_message();
  EXPECT_THAT(staged.error_message(), Not(HasSubstr("stays")));
  EXPECT_EQ(agent_.service().last_delete().id(), "pvc-1");
}

TEST_F(NodeServiceTest, StageRefusesMissingAndBadFields) {
  auto request = StageRequest();
  request.clear_volume_id();
  ExpectInvalid(Stage(request), "volume_id is required");

  request = StageRequest();
  request.clear_staging_target_path();
  ExpectInvalid(Stage(request), "staging_target_path is required");

  request = StageRequest();
  request.set_staging_target_path("relative/path");
  ExpectInvalid(Stage(request), "staging_target_path must be absolute");

  request = StageRequest();
  request.clear_volume_capability();
  ExpectInvalid(Stage(request), "volume_capability is required");

  request = StageRequest();
  request.mutable_volume_capability()->clear_mount();
  ExpectInvalid(Stage(request), "access type");

  request = StageRequest();
  *request.mutable_volume_capability() = MountCapability("btrfs");
  ExpectInvalid(Stage(request), "fs_type 'btrfs'");

  request = StageRequest();
  request.mutable_volume_capability()->mutable_access_mode()->set_mode(
      VolumeCapability::AccessMode::MULTI_NODE_MULTI_WRITER);
  ExpectInvalid(Stage(request), "MULTI_NODE_MULTI_WRITER");

  request = StageRequest();
  request.mutable_volume_context()->erase("backend");
  ExpectInvalid(Stage(request), "'backend'");
}

TEST_F(NodeServiceTest, PublishRefusesMissingFields) {
  auto request = PublishRequest();
  request.clear_volume_id();
  ExpectInvalid(Publish(request), "volume_id is required");

  request = PublishRequest();
  request.clear_target_path();
  ExpectInvalid(Publish(request), "target_path is required");

  request = PublishRequest();
  request.clear_staging_target_path();
  ExpectInvalid(Publish(request), "staging_target_path is required");

  request = PublishRequest();
  request.clear_volume_capability();
  ExpectInvalid(Publish(request), "volume_capability is required");
}

TEST_F(NodeServiceTest, UnpublishUnstageAndStatsRefuseMissingFields) {
  ::csi::v1::NodeUnpublishVolumeRequest unpublish;
  ::csi::v1::NodeUnpublishVolumeResponse unpublished;
  unpublish.set_target_path("/t");
  ExpectInvalid(node_.NodeUnpublishVolume(nullptr, &unpublish, &unpublished), "volume_id");
  unpublish.set_volume_id("pvc-1");
  unpublish.clear_target_path();
  ExpectInvalid(node_.NodeUnpublishVolume(nullptr, &unpublish, &unpublished), "target_path");

  ::csi::v1::NodeUnstageVolumeRequest unstage;
  ::csi::v1::NodeUnstageVolumeResponse unstaged;
  unstage.set_staging_target_path("/s");
  ExpectInvalid(node_.NodeUnstageVolume(nullptr, &unstage, &unstaged), "volume_id");
  unstage.set_volume_id("pvc-1");
  unstage.clear_staging_target_path();
  ExpectInvalid(node_.NodeUnstageVolume(nullptr, &unstage, &unstaged), "staging_target_path");

  ::csi::v1::NodeGetVolumeStatsRequest stats;
  ::csi::v1::NodeGetVolumeStatsResponse stats_response;
  stats.set_volume_path("/v");
  ExpectInvalid(node_.NodeGetVolumeStats(nullptr, &stats, &stats_response), "volume_id");
  stats.set_volume_id("pvc-1");
  stats.clear_volume_path();
  ExpectInvalid(node_.NodeGetVolumeStats(nullptr, &stats, &stats_response), "volume_path");
}

// The volume is looked up before the path (an unknown volume is NOT_FOUND whatever the path:
// VM scenario 68 checks both against a real agent); with no agent to ask, that is UNAVAILABLE.
TEST_F(NodeServiceTest, StatsAsksForTheVolumeBeforeLookingAtThePath) {
  ::csi::v1::NodeGetVolumeStatsRequest stats;
  ::csi::v1::NodeGetVolumeStatsResponse response;
  stats.set_volume_id("pvc-1");
  for (const char* path : {"/nonexistent/volume/path", "relative/path"}) {
    stats.set_volume_path(path);
    EXPECT_EQ(node_.NodeGetVolumeStats(nullptr, &stats, &response).error_code(),
              grpc::StatusCode::UNAVAILABLE)
        << path;
  }
}

TEST_F(NodeServiceTest, ExpandRefusesMissingAndBadFieldsBeforeAskingTheAgent) {
  ::csi::v1::NodeExpandVolumeRequest expand;
  ::csi::v1::NodeExpandVolumeResponse response;
  expand.set_volume_path("/v");
  expand.mutable_capacity_range()->set_required_bytes(int64_t{2} << 30);
  ExpectInvalid(node_.NodeExpandVolume(nullptr, &expand, &response), "volume_id is required");

  expand.set_volume_id("pvc-1");
  expand.clear_volume_path();
  ExpectInvalid(node_.NodeExpandVolume(nullptr, &expand, &response), "volume_path is required");
  // A relative path is judged after the volume is found (csi-sanity sends relative paths and
  // wants NOT_FOUND for an unknown volume): here the agent cannot be reached first.
  expand.set_volume_path("relative");
  EXPECT_EQ(node_.NodeExpandVolume(nullptr, &expand, &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  expand.set_volume_path("/v");
  expand.mutable_capacity_range()->set_required_bytes(-1);
  ExpectInvalid(node_.NodeExpandVolume(nullptr, &expand, &response), "capacity_range");

  expand.mutable_capacity_range()->set_required_bytes(int64_t{2} << 30);
  *expand.mutable_volume_capability() = MountCapability("btrfs");
  ExpectInvalid(node_.NodeExpandVolume(nullptr, &expand, &response), "fs_type 'btrfs'");

  // Valid: on to the agent, which is not there.
  *expand.mutable_volume_capability() = MountCapability("ext4");
  EXPECT_EQ(node_.NodeExpandVolume(nullptr, &expand, &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(NodeServiceTest, CapabilitiesAndInfo) {
  ::csi::v1::NodeGetCapabilitiesRequest request;
  ::csi::v1::NodeGetCapabilitiesResponse response;
  ASSERT_TRUE(node_.NodeGetCapabilities(nullptr, &request, &response).ok());
  std::vector<int> types;
  for (const auto& capability : response.capabilities()) types.push_back(capability.rpc().type());
  using Rpc = ::csi::v1::NodeServiceCapability::RPC;
  EXPECT_THAT(types,
              ::testing::UnorderedElementsAre(Rpc::STAGE_UNSTAGE_VOLUME, Rpc::GET_VOLUME_STATS,
                                              Rpc::EXPAND_VOLUME, Rpc::VOLUME_CONDITION));

  ::csi::v1::NodeGetInfoRequest info_request;
  ::csi::v1::NodeGetInfoResponse info;
  ASSERT_TRUE(node_.NodeGetInfo(nullptr, &info_request, &info).ok());
  EXPECT_EQ(info.node_id(), "node-1");
  EXPECT_EQ(info.accessible_topology().segments().at("blk.csi.storage/node"), "node-1");
}

}  // namespace
}  // namespace blk::csi
