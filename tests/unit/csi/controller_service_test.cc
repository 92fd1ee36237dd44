#include "csi/controller_service.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/agent_address.h"
#include "client/volume_client.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/unit/cli/fake_agent.h"
#include "tests/unit/temp_dir.h"

namespace blk::csi {
namespace {

using ::csi::v1::VolumeCapability;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr char kTopologyKey[] = "blk.csi.storage/node";

// The controller next to a fake agent, which answers GetVolume from what was created in it.
class ControllerServiceTest : public ::testing::Test {
 protected:
  ControllerServiceTest()
      : agent_(blk::client::UnixAgentAddress(fake_.socket_path()), absl::Seconds(5)),
        controller_("node-1", kTopologyKey, agent_, Records()) {
    EXPECT_TRUE(Records().Open().ok());
    EXPECT_EQ(::mkdir(pool().c_str(), 0700), 0);
  }

  ProvisionedVolumes Records() const { return ProvisionedVolumes(state_.path() + "/volumes"); }
  std::string pool() const { return state_.path() + "/pool"; }

  static VolumeCapability Capability(
      VolumeCapability::AccessMode::Mode mode = VolumeCapability::AccessMode::SINGLE_NODE_WRITER) {
    VolumeCapability capability;
    capability.mutable_mount()->set_fs_type("ext4");
    capability.mutable_access_mode()->set_mode(mode);
    return capability;
  }

  // What the csi-provisioner sends for a 1 GiB PVC of an NBD StorageClass, scheduled to node-1.
  static ::csi::v1::CreateVolumeRequest CreateRequest() {
    ::csi::v1::CreateVolumeRequest request;
    request.set_name("pvc-0f3c9a7e-5b1d-4c2e-9a8f-1d2e3f4a5b6c");
    request.mutable_capacity_range()->set_required_bytes(int64_t{1} << 30);
    *request.add_volume_capabilities() = Capability();
    (*request.mutable_parameters())["backend"] = "nbd://nbd-server.example/{volume}";
    (*request.mutable_parameters())["queues"] = "2";
    (*request.mutable_parameters())["csi.storage.k8s.io/pvc/name"] = "data";
    (*request.mutable_accessibility_requirements()
          ->add_requisite()
          ->mutable_segments())[kTopologyKey] = "node-1";
    return request;
  }

  grpc::Status Create(const ::csi::v1::CreateVolumeRequest& request,
                      ::csi::v1::CreateVolumeResponse* response = nullptr) {
    ::csi::v1::CreateVolumeResponse ignored;
    return controller_.CreateVolume(nullptr, &request, response ? response : &ignored);
  }
  grpc::Status Delete(const std::string& volume_id) {
    ::csi::v1::DeleteVolumeRequest request;
    request.set_volume_id(volume_id);
    ::csi::v1::DeleteVolumeResponse response;
    return controller_.DeleteVolume(nullptr, &request, &response);
  }
  // As NodeStageVolume leaves it: an agent volume of that id and size.
  void StageInAgent(const std::string& id, uint64_t size_bytes) {
    blk::v1::CreateVolumeRequest create;
    create.mutable_volume()->set_id(id);
    create.mutable_volume()->set_size_bytes(size_bytes);
    create.mutable_volume()->mutable_null();
    ASSERT_TRUE(agent_.CreateVolume(create).ok());
  }

  static void ExpectCode(const grpc::Status& status, grpc::StatusCode code,
                         const std::string& message) {
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(message));
  }

  blk::testing::TempDir state_;
  blk::cli::testing::FakeAgent fake_;
  blk::client::VolumeClient agent_;
  ControllerService controller_;
};

TEST_F(ControllerServiceTest, CreateDescribesTheVolumeFromTheStorageClass) {
  ::csi::v1::CreateVolumeResponse response;
  ASSERT_TRUE(Create(CreateRequest(), &response).ok());
  const ::csi::v1::Volume& volume = response.volume();
  // A Kubernetes PV name is a valid agent id: the id is the name.
  EXPECT_EQ(volume.volume_id(), "pvc-0f3c9a7e-5b1d-4c2e-9a8f-1d2e3f4a5b6c");
  EXPECT_EQ(volume.capacity_bytes(), int64_t{1} << 30);
  // Kubernetes' own parameters (with a '/') are not part of the volume.
  EXPECT_THAT(volume.volume_context(),
              UnorderedElementsAre(Pair("backend",
                                        "nbd://nbd-server.example/"
                                        "pvc-0f3c9a7e-5b1d-4c2e-9a8f-1d2e3f4a5b6c"),
                                   Pair("queues", "2"), Pair("size", "1073741824")));
  ASSERT_EQ(volume.accessible_topology_size(), 1);
  EXPECT_THAT(volume.accessible_topology(0).segments(),
              UnorderedElementsAre(Pair(kTopologyKey, "node-1")));
  // No data path: the agent is only asked whether the volume exists.
  EXPECT_THAT(fake_.service().methods(), ElementsAre("GetVolume"));
}

TEST_F(ControllerServiceTest, TheSameRequestGetsTheSameAnswer) {
  ::csi::v1::CreateVolumeResponse first;
  ::csi::v1::CreateVolumeResponse second;
  ASSERT_TRUE(Create(CreateRequest(), &first).ok());
  ASSERT_TRUE(Create(CreateRequest(), &second).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(first, second))
      << first.DebugString() << " vs " << second.DebugString();
  // Also once the node staged it, and from a controller started again on the same records.
  StageInAgent(first.volume().volume_id(), int64_t{1} << 30);
  ControllerService restarted("node-1", kTopologyKey, agent_, Records());
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  ::csi::v1::CreateVolumeResponse third;
  ASSERT_TRUE(restarted.CreateVolume(nullptr, &request, &third).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(first, third));
}

TEST_F(ControllerServiceTest, TheSameNameWithAnotherCapacityOrClassAlreadyExists) {
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  ASSERT_TRUE(Create(request).ok());
  // Not staged anywhere: the record alone knows.
  request.mutable_capacity_range()->set_required_bytes(int64_t{2} << 30);
  ExpectCode(Create(request), grpc::StatusCode::ALREADY_EXISTS, "with 1073741824 bytes");
  request.mutable_capacity_range()->set_required_bytes(0);
  request.mutable_capacity_range()->set_limit_bytes(512 << 20);
  ExpectCode(Create(request), grpc::StatusCode::ALREADY_EXISTS, "outside the capacity_range");
  // A range the volume fits is the same volume (the spec's "compatible").
  request.mutable_capacity_range()->set_required_bytes(512 << 20);
  request.mutable_capacity_range()->set_limit_bytes(int64_t{4} << 30);
  ::csi::v1::CreateVolumeResponse response;
  ASSERT_TRUE(Create(request, &response).ok());
  EXPECT_EQ(response.volume().capacity_bytes(), int64_t{1} << 30);
  request = CreateRequest();
  (*request.mutable_parameters())["queues"] = "4";
  ExpectCode(Create(request), grpc::StatusCode::ALREADY_EXISTS, "other StorageClass parameters");
}

TEST_F(ControllerServiceTest, AVolumeStagedButNotProvisionedHereIsNotHandedOut) {
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  StageInAgent(request.name(), int64_t{1} << 30);
  ExpectCode(Create(request), grpc::StatusCode::ALREADY_EXISTS,
             "was not provisioned by this controller");
}

TEST_F(ControllerServiceTest, AClassWhoseClaimsWouldShareABackingIsRefused) {
  for (const std::string backend :
       {"nbd://nbd-server.example/export1", "file:///var/lib/blk/shared.img",
        "nbd+unix:///export?socket=/run/nbd.sock"}) {
    ::csi::v1::CreateVolumeRequest request = CreateRequest();
    (*request.mutable_parameters())["backend"] = backend;
    ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "two claims would share it");
  }
  for (const std::string backend :
       {"nvme:///dev/ng0n1", "nvme-tcp://10.0.0.5/nqn.2014-08.org.example:array1?nsid=1",
        "nvme-tcp://10.0.0.5/nqn.2014-08.org.example:{volume}?nsid=1"}) {
    ::csi::v1::CreateVolumeRequest request = CreateRequest();
    (*request.mutable_parameters())["backend"] = backend;
    ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "one PersistentVolume per");
  }
  // No record was left by the refusals: the name is still free.
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  EXPECT_TRUE(Create(request).ok());
}

TEST_F(ControllerServiceTest, AFilePoolGetsAFilePerVolumeRemovedByDelete) {
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  (*request.mutable_parameters())["backend"] = "file://" + pool() + "/{volume}.img";
  ::csi::v1::CreateVolumeResponse first;
  ASSERT_TRUE(Create(request, &first).ok());
  const std::string first_file = pool() + "/" + first.volume().volume_id() + ".img";
  EXPECT_EQ(first.volume().volume_context().at("backend"), "file://" + first_file);
  struct stat st {};
  ASSERT_EQ(::stat(first_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, int64_t{1} << 30);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // A second claim of the class: a second file.
  request.set_name("pvc-second");
  ::csi::v1::CreateVolumeResponse second;
  ASSERT_TRUE(Create(request, &second).ok());
  EXPECT_EQ(::access((pool() + "/pvc-second.img").c_str(), F_OK), 0);

  EXPECT_TRUE(Delete(first.volume().volume_id()).ok());
  EXPECT_NE(::access(first_file.c_str(), F_OK), 0);
  EXPECT_TRUE(Delete(first.volume().volume_id()).ok());
  EXPECT_EQ(::access((pool() + "/pvc-second.img").c_str(), F_OK), 0);
  // The name again after the delete: a new, empty file.
  request.set_name(CreateRequest().name());
  ASSERT_TRUE(Create(request).ok());
  EXPECT_EQ(::access(first_file.c_str(), F_OK), 0);
}

TEST_F(ControllerServiceTest, AFileTheControllerDidNotMakeIsNeverHandedOut) {
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  (*request.mutable_parameters())["backend"] = "file://" + pool() + "/{volume}.img";
  const std::string file = pool() + "/" + request.name() + ".img";
  {
    std::ofstream someone_elses(file);
    someone_elses << "old data";
  }
  ExpectCode(Create(request), grpc::StatusCode::FAILED_PRECONDITION, "exists already");
  // No record claims it: a delete leaves it alone.
  EXPECT_TRUE(Delete(request.name()).ok());
  EXPECT_EQ(::access(file.c_str(), F_OK), 0);

  // A pool directory that is not there (not mounted yet) is an error, not a file elsewhere.
  (*request.mutable_parameters())["backend"] = "file://" + pool() + "/missing/{volume}.img";
  ExpectCode(Create(request), grpc::StatusCode::FAILED_PRECONDITION, "not there");
}

TEST_F(ControllerServiceTest, CreateRefusesMissingAndUnsupportedFields) {
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  request.clear_name();
  ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "name is required");

  request = CreateRequest();
  request.clear_volume_capabilities();
  ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT,
             "volume_capabilities is required");

  request = CreateRequest();
  *request.add_volume_capabilities() =
      Capability(VolumeCapability::AccessMode::MULTI_NODE_MULTI_WRITER);
  ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "MULTI_NODE_MULTI_WRITER");

  request = CreateRequest();
  request.mutable_volume_capabilities(0)->clear_mount();
  ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "needs an access type");

  request = CreateRequest();
  request.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-1");
  ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "volume_content_source");
  // Nothing reached the agent.
  EXPECT_EQ(fake_.service().calls(), 0);
}

TEST_F(ControllerServiceTest, ABadStorageClassIsRefusedNamingTheParameter) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"backend", "ftp://host/x"},
      {"queues", "0"},
      {"rqAffinity", "7"},
      {"size", "lots"},
      {"sise", "1Gi"},
  };
  for (const auto& [key, value] : bad) {
    ::csi::v1::CreateVolumeRequest request = CreateRequest();
    (*request.mutable_parameters())[key] = value;
    ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "StorageClass parameters: ");
    ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, key);
  }
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  request.mutable_parameters()->erase("backend");
  ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "no 'backend'");
  EXPECT_EQ(fake_.service().calls(), 0);
}

TEST_F(ControllerServiceTest, CapacityRangeRules) {
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  request.mutable_capacity_range()->set_required_bytes(-1);
  ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "negative");

  request = CreateRequest();
  request.mutable_capacity_range()->set_limit_bytes(-1);
  ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "negative");

  request = CreateRequest();
  request.mutable_capacity_range()->set_limit_bytes(1 << 20);
  ExpectCode(Create(request), grpc::StatusCode::INVALID_ARGUMENT, "larger than limit_bytes");

  request = CreateRequest();
  request.mutable_capacity_range()->set_required_bytes(int64_t{1} << 51);
  ExpectCode(Create(request), grpc::StatusCode::OUT_OF_RANGE, "at most");

  // No multiple of 4096 fits under the limit.
  request = CreateRequest();
  request.mutable_capacity_range()->set_required_bytes(100);
  request.mutable_capacity_range()->set_limit_bytes(1000);
  ExpectCode(Create(request), grpc::StatusCode::OUT_OF_RANGE, "no multiple of 4096");

  // A size the StorageClass fixes must lie in the range.
  request = CreateRequest();
  (*request.mutable_parameters())["size"] = "512Mi";
  ExpectCode(Create(request), grpc::StatusCode::OUT_OF_RANGE, "outside the capacity_range");
  request.mutable_capacity_range()->set_required_bytes(1 << 20);
  request.mutable_capacity_range()->set_limit_bytes(256 << 20);
  ExpectCode(Create(request), grpc::StatusCode::OUT_OF_RANGE, "outside the capacity_range");
  EXPECT_EQ(fake_.service().calls(), 0);
}

TEST_F(ControllerServiceTest, TheSizeTheVolumeGets) {
  struct Case {
    std::string backend;
    std::string class_size;  // "" for none
    int64_t required;
    int64_t limit;
    int64_t want;  // 0: the backend's own size, no "size" in the context
  };
  const std::vector<Case> cases = {
      {"nbd://h/{volume}", "", 1000, 0, 4096},   // rounded up to the size unit
      {"nbd://h/{volume}", "", 0, 10000, 8192},  // only a limit: rounded down
      {"nbd://h/{volume}", "", 0, 0, 0},         // no range: the whole export
      {"file://" + pool() + "/{volume}.img", "", 0, 0, kDefaultCapacityBytes},
      {"null://", "", 0, 0, kDefaultCapacityBytes},
      {"nbd://h/{volume}", "2Gi", 1 << 30, 0, int64_t{2} << 30},  // the class's size, in range
  };
  int name = 0;
  for (const Case& c : cases) {
    ::csi::v1::CreateVolumeRequest request = CreateRequest();
    request.set_name("pvc-" + std::to_string(++name));
    request.clear_capacity_range();
    if (c.required != 0) request.mutable_capacity_range()->set_required_bytes(c.required);
    if (c.limit != 0) request.mutable_capacity_range()->set_limit_bytes(c.limit);
    (*request.mutable_parameters())["backend"] = c.backend;
    if (!c.class_size.empty()) (*request.mutable_parameters())["size"] = c.class_size;
    ::csi::v1::CreateVolumeResponse response;
    ASSERT_TRUE(Create(request, &response).ok()) << c.backend << " " << c.required;
    EXPECT_EQ(response.volume().capacity_bytes(), c.want) << c.backend << " " << c.required;
    const auto& context = response.volume().volume_context();
    if (c.want == 0) {
      EXPECT_FALSE(context.contains("size")) << c.backend;
    } else {
      ASSERT_TRUE(context.contains("size")) << c.backend;
      EXPECT_EQ(context.at("size"), std::to_string(c.want)) << c.backend;
    }
  }
}

TEST_F(ControllerServiceTest, ANameThatIsNoAgentIdGetsAStableValidOne) {
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  request.set_name("My Volume #1");
  ::csi::v1::CreateVolumeResponse first;
  ::csi::v1::CreateVolumeResponse second;
  ASSERT_TRUE(Create(request, &first).ok());
  ASSERT_TRUE(Create(request, &second).ok());
  EXPECT_EQ(first.volume().volume_id(), second.volume().volume_id());
  EXPECT_THAT(first.volume().volume_id(), ::testing::MatchesRegex("my-volume--1-[0-9a-f]{16}"));
}

TEST_F(ControllerServiceTest, TopologyMustIncludeThisNode) {
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  (*request.mutable_accessibility_requirements()
        ->mutable_requisite(0)
        ->mutable_segments())[kTopologyKey] = "node-2";
  ExpectCode(Create(request), grpc::StatusCode::RESOURCE_EXHAUSTED, "only on node node-1");
  // Among others, or none asked for: fine.
  (*request.mutable_accessibility_requirements()
        ->add_requisite()
        ->mutable_segments())[kTopologyKey] = "node-1";
  EXPECT_TRUE(Create(request).ok());
  request.clear_accessibility_requirements();
  EXPECT_TRUE(Create(request).ok());
}

TEST_F(ControllerServiceTest, AnAgentThatDoesNotAnswerIsUnavailable) {
  blk::client::VolumeClient nobody(blk::client::UnixAgentAddress(fake_.unused_socket_path()),
                                   absl::Seconds(5));
  ControllerService controller("node-1", kTopologyKey, nobody, Records());
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  ::csi::v1::CreateVolumeResponse response;
  EXPECT_EQ(controller.CreateVolume(nullptr, &request, &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ControllerServiceTest, DeleteIsIdempotentAndRefusesAStagedVolume) {
  ExpectCode(Delete(""), grpc::StatusCode::INVALID_ARGUMENT, "volume_id is required");
  ::csi::v1::CreateVolumeResponse created;
  ASSERT_TRUE(Create(CreateRequest(), &created).ok());
  EXPECT_TRUE(Delete(created.volume().volume_id()).ok());
  // The record is gone: the name may come back with another size.
  ::csi::v1::CreateVolumeRequest bigger = CreateRequest();
  bigger.mutable_capacity_range()->set_required_bytes(int64_t{2} << 30);
  EXPECT_TRUE(Create(bigger).ok());
  EXPECT_TRUE(Delete("pvc-1").ok());
  EXPECT_TRUE(Delete("pvc-1").ok());
  StageInAgent("pvc-2", 64 << 20);
  ExpectCode(Delete("pvc-2"), grpc::StatusCode::FAILED_PRECONDITION, "still staged");
  // Deleting never touches the agent's volumes: the node's unstage does.
  for (const std::string& method : fake_.service().methods()) {
    EXPECT_NE(method, "DeleteVolume");
  }
}

TEST_F(ControllerServiceTest, ValidateVolumeCapabilities) {
  ::csi::v1::ValidateVolumeCapabilitiesRequest request;
  ::csi::v1::ValidateVolumeCapabilitiesResponse response;
  ExpectCode(controller_.ValidateVolumeCapabilities(nullptr, &request, &response),
             grpc::StatusCode::INVALID_ARGUMENT, "volume_id is required");
  request.set_volume_id("pvc-1");
  ExpectCode(controller_.ValidateVolumeCapabilities(nullptr, &request, &response),
             grpc::StatusCode::INVALID_ARGUMENT, "volume_capabilities is required");
  *request.add_volume_capabilities() = Capability();
  ExpectCode(controller_.ValidateVolumeCapabilities(nullptr, &request, &response),
             grpc::StatusCode::NOT_FOUND, "not provisioned by the controller of node node-1");
  (*request.mutable_volume_context())["sise"] = "1";
  ExpectCode(controller_.ValidateVolumeCapabilities(nullptr, &request, &response),
             grpc::StatusCode::NOT_FOUND, "not a blk-csi volume");
  request.clear_volume_context();

  // Without a context, a volume this controller provisioned is described by its record.
  ::csi::v1::CreateVolumeResponse created;
  ASSERT_TRUE(Create(CreateRequest(), &created).ok());
  request.set_volume_id(created.volume().volume_id());
  ASSERT_TRUE(controller_.ValidateVolumeCapabilities(nullptr, &request, &response).ok());
  EXPECT_TRUE(response.has_confirmed());
  response.Clear();
  request.set_volume_id("pvc-1");

  (*request.mutable_volume_context())["backend"] = "nbd://h/e";
  (*request.mutable_volume_context())["size"] = "1073741824";
  ASSERT_TRUE(controller_.ValidateVolumeCapabilities(nullptr, &request, &response).ok());
  ASSERT_TRUE(response.has_confirmed());
  EXPECT_EQ(response.confirmed().volume_capabilities_size(), 1);
  EXPECT_THAT(response.confirmed().volume_context(),
              UnorderedElementsAre(Pair("backend", "nbd://h/e"), Pair("size", "1073741824")));

  *request.add_volume_capabilities() =
      Capability(VolumeCapability::AccessMode::MULTI_NODE_SINGLE_WRITER);
  response.Clear();
  ASSERT_TRUE(controller_.ValidateVolumeCapabilities(nullptr, &request, &response).ok());
  EXPECT_FALSE(response.has_confirmed());
  EXPECT_THAT(response.message(), HasSubstr("MULTI_NODE_SINGLE_WRITER"));
}

TEST_F(ControllerServiceTest, CapabilitiesAreCreateDeleteAndModify) {
  ::csi::v1::ControllerGetCapabilitiesRequest request;
  ::csi::v1::ControllerGetCapabilitiesResponse response;
  ASSERT_TRUE(controller_.ControllerGetCapabilities(nullptr, &request, &response).ok());
  ASSERT_EQ(response.capabilities_size(), 2);
  EXPECT_EQ(response.capabilities(0).rpc().type(),
            ::csi::v1::ControllerServiceCapability::RPC::CREATE_DELETE_VOLUME);
  EXPECT_EQ(response.capabilities(1).rpc().type(),
            ::csi::v1::ControllerServiceCapability::RPC::MODIFY_VOLUME);
}

grpc::Status Modify(ControllerService& controller, const std::string& volume_id,
                    const std::map<std::string, std::string>& parameters) {
  ::csi::v1::ControllerModifyVolumeRequest request;
  request.set_volume_id(volume_id);
  request.mutable_mutable_parameters()->insert(parameters.begin(), parameters.end());
  ::csi::v1::ControllerModifyVolumeResponse response;
  return controller.ControllerModifyVolume(nullptr, &request, &response);
}

TEST_F(ControllerServiceTest, CreateTakesAVolumeAttributesClassesLimits) {
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  (*request.mutable_parameters())["iops"] = "1000";
  (*request.mutable_mutable_parameters())["iops"] = "5000";
  (*request.mutable_mutable_parameters())["readBps"] = "100Mi";
  ::csi::v1::CreateVolumeResponse response;
  ASSERT_TRUE(Create(request, &response).ok());
  // The class's limit under the attributes class's: the context stages it so on any node.
  EXPECT_EQ(response.volume().volume_context().at("iops"), "5000");
  EXPECT_EQ(response.volume().volume_context().at("readBps"), "100Mi");

  ::csi::v1::CreateVolumeRequest other = CreateRequest();
  other.set_name("pvc-2");
  (*other.mutable_mutable_parameters())["queues"] = "4";
  ExpectCode(Create(other), grpc::StatusCode::INVALID_ARGUMENT,
             "mutable parameter 'queues' is not one blk-csi can change");
  (*other.mutable_mutable_parameters()).erase("queues");
  (*other.mutable_mutable_parameters())["iops"] = "lots";
  ExpectCode(Create(other), grpc::StatusCode::INVALID_ARGUMENT, "iops='lots'");
}

TEST_F(ControllerServiceTest, ModifyChangesTheStagedVolumesLimitsAndTheRecord) {
  ::csi::v1::CreateVolumeRequest request = CreateRequest();
  (*request.mutable_parameters())["readIops"] = "800";
  ::csi::v1::CreateVolumeResponse created;
  ASSERT_TRUE(Create(request, &created).ok());
  const std::string id = created.volume().volume_id();
  StageInAgent(id, int64_t{1} << 30);

  ASSERT_TRUE(Modify(controller_, id, {{"iops", "2000:4000"}}).ok());
  // The whole set of limits goes to the live device: the class's and the modified ones.
  const blk::v1::UpdateVolumeRequest update = fake_.service().last_update();
  EXPECT_EQ(update.volume().id(), id);
  EXPECT_THAT(update.update_mask().paths(), ElementsAre("limits"));
  EXPECT_EQ(update.volume().limits().read_iops().rate(), 800u);
  EXPECT_EQ(update.volume().limits().total_iops().rate(), 2000u);
  EXPECT_EQ(update.volume().limits().total_iops().burst(), 4000u);
  // An absent key changes nothing; "0" lifts a limit.
  ASSERT_TRUE(Modify(controller_, id, {{"readIops", "0"}}).ok());
  EXPECT_EQ(fake_.service().last_update().volume().limits().read_iops().rate(), 0u);
  EXPECT_EQ(fake_.service().last_update().volume().limits().total_iops().rate(), 2000u);

  absl::StatusOr<std::optional<ProvisionedVolume>> recorded = Records().Find(id);
  ASSERT_TRUE(recorded.ok() && recorded->has_value());
  EXPECT_THAT((*recorded)->modified_limits(),
              UnorderedElementsAre(Pair("iops", "2000:4000"), Pair("readIops", "0")));
  EXPECT_EQ(StagingContext(**recorded).at("readIops"), "0");
  // The context CreateVolume answered stays what it was (a repeated CreateVolume gets it).
  EXPECT_EQ((*recorded)->volume_context().at("readIops"), "800");
  ASSERT_TRUE(Create(request).ok());
}

TEST_F(ControllerServiceTest, ModifyOfAnUnstagedVolumeOnlyRecords) {
  ::csi::v1::CreateVolumeResponse created;
  ASSERT_TRUE(Create(CreateRequest(), &created).ok());
  const std::string id = created.volume().volume_id();
  ASSERT_TRUE(Modify(controller_, id, {{"writeBps", "10Mi"}}).ok());
  absl::StatusOr<std::optional<ProvisionedVolume>> recorded = Records().Find(id);
  ASSERT_TRUE(recorded.ok() && recorded->has_value());
  EXPECT_THAT((*recorded)->modified_limits(), ElementsAre(Pair("writeBps", "10Mi")));
}

TEST_F(ControllerServiceTest, ModifyRefusesBadRequestsAndChangesNothing) {
  ::csi::v1::CreateVolumeResponse created;
  ASSERT_TRUE(Create(CreateRequest(), &created).ok());
  const std::string id = created.volume().volume_id();
  StageInAgent(id, int64_t{1} << 30);
  ExpectCode(Modify(controller_, "", {{"iops", "1"}}), grpc::StatusCode::INVALID_ARGUMENT,
             "volume_id is required");
  ExpectCode(Modify(controller_, id, {}), grpc::StatusCode::INVALID_ARGUMENT,
             "mutable_parameters is required");
  ExpectCode(Modify(controller_, id, {{"backend", "null://"}}), grpc::StatusCode::INVALID_ARGUMENT,
             "mutable parameter 'backend' is not one blk-csi can change");
  ExpectCode(Modify(controller_, id, {{"bps", "-5"}}), grpc::StatusCode::INVALID_ARGUMENT,
             "bps='-5'");
  ExpectCode(Modify(controller_, "pvc-unknown", {{"iops", "100"}}), grpc::StatusCode::NOT_FOUND,
             "was not provisioned by the controller of node node-1");
  ExpectCode(Modify(controller_, "../volumes/x", {{"iops", "100"}}), grpc::StatusCode::NOT_FOUND,
             "was not provisioned");
  // The agent refuses a limit it cannot hold: the record keeps what it had.
  fake_.service().FailMethodWith(
      "UpdateVolume", grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "volume.limits: absurd"));
  ExpectCode(Modify(controller_, id, {{"iops", "100"}}), grpc::StatusCode::INVALID_ARGUMENT,
             "absurd");
  absl::StatusOr<std::optional<ProvisionedVolume>> recorded = Records().Find(id);
  ASSERT_TRUE(recorded.ok() && recorded->has_value());
  EXPECT_TRUE((*recorded)->modified_limits().empty());
}

}  // namespace
}  // namespace blk::csi
