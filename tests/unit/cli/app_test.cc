#include "cli/app.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/cli/fake_agent.h"

namespace blk::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

struct Outcome {
  int exit_code;
  std::string out;
  std::string err;
};

Outcome RunWith(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"blkctl"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out;
  std::ostringstream err;
  const int exit_code = RunBlkctl(static_cast<int>(argv.size()), argv.data(), out, err);
  return {exit_code, out.str(), err.str()};
}

class Blkctl : public ::testing::Test {
 protected:
  Outcome RunAgainstAgent(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"--socket", agent_.socket_path()};
    all.insert(all.end(), args.begin(), args.end());
    return RunWith(all);
  }

  testing::FakeAgent agent_;
};

TEST_F(Blkctl, NbdVolumeWithoutSizeAsksTheAgentForTheExportsSize) {
  Outcome outcome =
      RunAgainstAgent({"create-volume", "r1", "--backend", "nbd://127.0.0.1:10809/exp"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  ASSERT_EQ(agent_.service().calls(), 1);
  const blk::v1::Volume sent = agent_.service().last_create().volume();
  EXPECT_EQ(sent.size_bytes(), 0u);
  EXPECT_EQ(sent.nbd().uri(), "nbd://127.0.0.1:10809/exp");
}

TEST_F(Blkctl, NbdUnixVolumeWithoutSizeIsAccepted) {
  Outcome outcome =
      RunAgainstAgent({"create-volume", "r2", "--backend", "nbd+unix:///exp?socket=/run/nbd.sock"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_EQ(agent_.service().last_create().volume().size_bytes(), 0u);
}

TEST_F(Blkctl, NvmeVolumeWithoutSizeSendsPathOffsetAndPoll) {
  Outcome outcome = RunAgainstAgent(
      {"create-volume", "n1", "--backend", "nvme:///dev/ng0n1?offset=64M", "--poll"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  const blk::v1::Volume sent = agent_.service().last_create().volume();
  EXPECT_EQ(sent.size_bytes(), 0u);
  EXPECT_EQ(sent.logical_block_size(), 0u);
  EXPECT_EQ(sent.nvme().path(), "/dev/ng0n1");
  EXPECT_EQ(sent.nvme().offset_bytes(), 64u << 20);
  EXPECT_TRUE(sent.poll());
}

TEST_F(Blkctl, NvmeTcpVolumeWithoutSizeSendsTheFabric) {
  Outcome outcome = RunAgainstAgent(
      {"create-volume", "t1", "--backend",
       "nvme-tcp://10.0.0.5/nqn.2014-08.org.example:array1?nsid=2&path=[fd00::5]:4421"
       "&offset=64M&io_timeout=60"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  const blk::v1::Volume sent = agent_.service().last_create().volume();
  EXPECT_EQ(sent.size_bytes(), 0u);
  EXPECT_EQ(sent.nvme().path(), "");
  EXPECT_EQ(sent.nvme().offset_bytes(), 64u << 20);
  const blk::v1::NvmeFabric& fabric = sent.nvme().fabric();
  EXPECT_EQ(fabric.subsystem_nqn(), "nqn.2014-08.org.example:array1");
  EXPECT_EQ(fabric.nsid(), 2u);
  EXPECT_THAT(fabric.paths(), ElementsAre("10.0.0.5:4420", "[fd00::5]:4421"));
  EXPECT_EQ(fabric.io_timeout_seconds(), 60u);
}

TEST_F(Blkctl, IoTimeoutFlagPointsAnNvmeTcpVolumeToItsUri) {
  Outcome outcome = RunAgainstAgent(
      {"create-volume", "t1", "--backend", "nvme-tcp://h/nqn.x?nsid=1", "--io-timeout", "5"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_THAT(outcome.err, HasSubstr("an nvme-tcp:// URI takes &io_timeout=SECONDS"));
  EXPECT_FALSE(agent_.service().last_create().has_volume());
}

TEST_F(Blkctl, CreateVolumeSendsEveryFlagInTheRequest) {
  Outcome outcome =
      RunAgainstAgent({"create-volume", "v1", "--size", "64MiB", "--backend",
                       "file:///var/lib/blk/v%201.img", "--queues", "2", "--queue-depth", "64",
                       "--block-size", "4096", "--read-only", "--fail-fast"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  const blk::v1::Volume sent = agent_.service().last_create().volume();
  EXPECT_EQ(sent.id(), "v1");
  EXPECT_EQ(sent.size_bytes(), 64u << 20);
  EXPECT_EQ(sent.file().path(), "/var/lib/blk/v 1.img");
  EXPECT_EQ(sent.queues(), 2u);
  EXPECT_EQ(sent.queue_depth(), 64u);
  EXPECT_EQ(sent.logical_block_size(), 4096u);
  EXPECT_TRUE(sent.read_only());
  EXPECT_TRUE(sent.fail_fast());
  EXPECT_THAT(outcome.out, HasSubstr("device:       /dev/ublkb0\n"));
  EXPECT_THAT(outcome.err, IsEmpty());
}

TEST_F(Blkctl, CreateNbdVolumeSendsTheUriAndIoTimeout) {
  Outcome outcome = RunAgainstAgent({"create-volume", "r1", "--size", "64M", "--backend",
                                     "nbd://127.0.0.1:10809/", "--io-timeout", "5"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  const blk::v1::Volume sent = agent_.service().last_create().volume();
  EXPECT_EQ(sent.nbd().uri(), "nbd://127.0.0.1:10809/");
  EXPECT_EQ(sent.nbd().io_timeout_seconds(), 5u);
}

TEST_F(Blkctl, IoTimeoutIsRefusedForBackendsOtherThanNbd) {
  Outcome outcome = RunAgainstAgent(
      {"create-volume", "v1", "--size", "1G", "--backend", "null://", "--io-timeout", "5"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_THAT(outcome.err, HasSubstr("--io-timeout applies to nbd"));
  EXPECT_FALSE(agent_.service().last_create().has_volume());
}

TEST_F(Blkctl, CreateVolumeLeavesUnsetTunablesAtZeroForTheServerDefault) {
  Outcome outcome =
      RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  const blk::v1::Volume sent = agent_.service().last_create().volume();
  EXPECT_EQ(sent.backend_case(), blk::v1::Volume::kNull);
  EXPECT_EQ(sent.queues(), 0u);
  EXPECT_EQ(sent.queue_depth(), 0u);
  EXPECT_EQ(sent.logical_block_size(), 0u);
  EXPECT_FALSE(sent.read_only());
}

TEST_F(Blkctl, CreateVolumeSendsRqAffinityAndPlacement) {
  Outcome outcome = RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://",
                                     "--rq-affinity", "0", "--placement", "0,2-3"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  const blk::v1::Volume sent = agent_.service().last_create().volume();
  ASSERT_TRUE(sent.has_rq_affinity());
  EXPECT_EQ(sent.rq_affinity(), 0u);
  EXPECT_EQ(sent.placement(), "0,2-3");
}

TEST_F(Blkctl, CreateVolumeWithoutRqAffinityLeavesItUnsetForTheKernelDefault) {
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://"}).exit_code,
      kExitOk);
  EXPECT_FALSE(agent_.service().last_create().volume().has_rq_affinity());
  EXPECT_EQ(agent_.service().last_create().volume().placement(), "");
}

TEST_F(Blkctl, UpdateVolumeSendsTheValueAndAMaskNamingIt) {
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://"}).exit_code,
      kExitOk);
  Outcome outcome = RunAgainstAgent({"update-volume", "v1", "--rq-affinity", "2"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  const blk::v1::UpdateVolumeRequest sent = agent_.service().last_update();
  EXPECT_EQ(sent.volume().id(), "v1");
  EXPECT_EQ(sent.volume().rq_affinity(), 2u);
  EXPECT_THAT(sent.update_mask().paths(), ElementsAre("rq_affinity"));
  EXPECT_THAT(outcome.out, HasSubstr("rq affinity:  2\n"));
}

TEST_F(Blkctl, UpdateVolumeLeavesRangeChecksToTheAgent) {
  // The agent is the one authority on valid values; blkctl passes 3 on and prints the refusal.
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://"}).exit_code,
      kExitOk);
  agent_.service().FailWith(
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "volume.rq_affinity: 3 is not 0, 1 or 2"));
  Outcome outcome = RunAgainstAgent({"update-volume", "v1", "--rq-affinity", "3"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_EQ(outcome.err, "blkctl: INVALID_ARGUMENT: volume.rq_affinity: 3 is not 0, 1 or 2\n");
  EXPECT_EQ(agent_.service().last_update().volume().rq_affinity(), 3u);
}

TEST_F(Blkctl, CreateVolumeSendsTheLimitsGiven) {
  Outcome outcome =
      RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://", "--read-iops",
                       "1000:100", "--iops", "5000", "--write-bps", "10M:1G", "--bps", "50M"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  const blk::v1::VolumeLimits sent = agent_.service().last_create().volume().limits();
  EXPECT_EQ(sent.read_iops().rate(), 1000u);
  EXPECT_EQ(sent.read_iops().burst(), 100u);
  EXPECT_FALSE(sent.has_write_iops());
  EXPECT_EQ(sent.total_iops().rate(), 5000u);
  EXPECT_FALSE(sent.has_read_bytes_per_second());
  EXPECT_EQ(sent.write_bytes_per_second().rate(), 10u << 20);
  EXPECT_EQ(sent.write_bytes_per_second().burst(), 1u << 30);
  EXPECT_EQ(sent.total_bytes_per_second().rate(), 50u << 20);
  EXPECT_THAT(outcome.out,
              HasSubstr("limits:       read 1000 iops (burst 100), total 5000 iops, write 10MiB/s "
                        "(burst 1GiB), total 50MiB/s\n"));
}

TEST_F(Blkctl, CreateVolumeWithoutLimitsSendsNone) {
  Outcome outcome =
      RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_FALSE(agent_.service().last_create().volume().has_limits());
  EXPECT_THAT(outcome.out, HasSubstr("limits:       none\n"));
  EXPECT_THAT(outcome.out, HasSubstr("throttled:    0 requests, 0.000 s\n"));
}

TEST_F(Blkctl, UpdateVolumeMergesTheGivenLimitsIntoTheVolumesCurrentOnes) {
  ASSERT_EQ(RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://",
                             "--read-iops", "1000", "--write-bps", "10M"})
                .exit_code,
            kExitOk);
  Outcome outcome =
      RunAgainstAgent({"update-volume", "v1", "--read-iops", "500:50", "--iops", "900"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_THAT(agent_.service().methods(), ElementsAre("CreateVolume", "GetVolume", "UpdateVolume"));
  const blk::v1::UpdateVolumeRequest sent = agent_.service().last_update();
  EXPECT_THAT(sent.update_mask().paths(), ElementsAre("limits"));
  EXPECT_FALSE(sent.volume().has_rq_affinity());
  const blk::v1::VolumeLimits& limits = sent.volume().limits();
  EXPECT_EQ(limits.read_iops().rate(), 500u);
  EXPECT_EQ(limits.read_iops().burst(), 50u);
  EXPECT_EQ(limits.total_iops().rate(), 900u);
  EXPECT_EQ(limits.write_bytes_per_second().rate(), 10u << 20);  // kept
  EXPECT_THAT(outcome.out,
              HasSubstr("limits:       read 500 iops (burst 50), total 900 iops, write 10MiB/s\n"));

  // A rate of 0 lifts that one limit.
  ASSERT_EQ(RunAgainstAgent({"update-volume", "v1", "--write-bps", "0"}).exit_code, kExitOk);
  const blk::v1::VolumeLimits after = agent_.service().last_update().volume().limits();
  EXPECT_FALSE(after.has_write_bytes_per_second());
  EXPECT_EQ(after.read_iops().rate(), 500u);
}

TEST_F(Blkctl, UpdateVolumeNoLimitsLiftsThemAllWithoutAskingForTheCurrentOnes) {
  ASSERT_EQ(RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://",
                             "--read-iops", "1000"})
                .exit_code,
            kExitOk);
  Outcome outcome = RunAgainstAgent({"update-volume", "v1", "--no-limits"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_THAT(agent_.service().methods(), ElementsAre("CreateVolume", "UpdateVolume"));
  EXPECT_THAT(agent_.service().last_update().update_mask().paths(), ElementsAre("limits"));
  EXPECT_FALSE(agent_.service().last_update().volume().has_limits());
  EXPECT_THAT(outcome.out, HasSubstr("limits:       none\n"));

  // With limit flags: only those.
  ASSERT_EQ(RunAgainstAgent({"update-volume", "v1", "--read-iops", "7"}).exit_code, kExitOk);
  ASSERT_EQ(RunAgainstAgent({"update-volume", "v1", "--no-limits", "--bps", "1M"}).exit_code,
            kExitOk);
  const blk::v1::VolumeLimits sent = agent_.service().last_update().volume().limits();
  EXPECT_FALSE(sent.has_read_iops());
  EXPECT_EQ(sent.total_bytes_per_second().rate(), 1u << 20);
}

TEST_F(Blkctl, UpdateVolumeSendsRqAffinityAndLimitsInOneRequest) {
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://"}).exit_code,
      kExitOk);
  Outcome outcome =
      RunAgainstAgent({"update-volume", "v1", "--rq-affinity", "1", "--write-iops", "300"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  const blk::v1::UpdateVolumeRequest sent = agent_.service().last_update();
  EXPECT_THAT(sent.update_mask().paths(), ElementsAre("rq_affinity", "limits"));
  EXPECT_EQ(sent.volume().rq_affinity(), 1u);
  EXPECT_EQ(sent.volume().limits().write_iops().rate(), 300u);
}

TEST_F(Blkctl, UpdateVolumeOfAnUnknownVolumeSendsNoUpdate) {
  Outcome outcome = RunAgainstAgent({"update-volume", "nope", "--iops", "10"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_THAT(outcome.err, StartsWith("blkctl: NOT_FOUND: "));
  EXPECT_THAT(agent_.service().methods(), ElementsAre("GetVolume"));
}

TEST_F(Blkctl, ResizeVolumeSendsTheParsedSize) {
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://"}).exit_code,
      kExitOk);
  Outcome outcome = RunAgainstAgent({"resize-volume", "v1", "--size", "2G"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_EQ(agent_.service().last_resize().id(), "v1");
  EXPECT_EQ(agent_.service().last_resize().size_bytes(), uint64_t{2} << 30);
  EXPECT_THAT(agent_.service().methods(), ElementsAre("CreateVolume", "ResizeVolume"));
}

TEST_F(Blkctl, ResizeVolumeRefusalIsPrintedWithItsCode) {
  agent_.service().FailWith(grpc::Status(
      grpc::StatusCode::FAILED_PRECONDITION,
      "volume 'v1': this kernel cannot resize a ublk device online: it lacks UBLK_F_UPDATE_SIZE"));
  Outcome outcome = RunAgainstAgent({"resize-volume", "v1", "--size", "2G"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_THAT(outcome.err, StartsWith("blkctl: FAILED_PRECONDITION: volume 'v1': "));
}

TEST_F(Blkctl, ServerErrorIsPrintedWithItsCodeAndExitsOne) {
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "v1", "--size", "64M", "--backend", "null://"}).exit_code,
      kExitOk);
  Outcome outcome =
      RunAgainstAgent({"create-volume", "v1", "--size", "128M", "--backend", "null://"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_EQ(outcome.err, "blkctl: ALREADY_EXISTS: volume v1 exists with size 67108864\n");
  EXPECT_THAT(outcome.out, IsEmpty());
}

TEST_F(Blkctl, ServerUnavailableIsNotMistakenForAnUnreachableSocket) {
  agent_.service().FailWith(grpc::Status(grpc::StatusCode::UNAVAILABLE, "ublk is not loaded"));
  Outcome outcome = RunAgainstAgent({"node-info"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_EQ(outcome.err, "blkctl: UNAVAILABLE: ublk is not loaded\n");
}

TEST_F(Blkctl, DeleteOfOpenVolumeIsRefusedWithoutForce) {
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "busy", "--size", "64M", "--backend", "null://"}).exit_code,
      kExitOk);
  Outcome refused = RunAgainstAgent({"delete-volume", "busy"});
  EXPECT_EQ(refused.exit_code, kExitRpcError);
  EXPECT_THAT(refused.err, StartsWith("blkctl: FAILED_PRECONDITION: volume busy is open"));

  Outcome forced = RunAgainstAgent({"delete-volume", "busy", "--force"});
  EXPECT_EQ(forced.exit_code, kExitOk) << forced.err;
  EXPECT_TRUE(agent_.service().last_delete().force());
  EXPECT_EQ(forced.out, "volume busy deleted\n");
}

TEST_F(Blkctl, DeleteVolumeAsJsonPrintsTheEmptyResponse) {
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "gone", "--size", "64M", "--backend", "null://"}).exit_code,
      kExitOk);
  Outcome outcome = RunAgainstAgent({"delete-volume", "gone", "-o", "json"});
  EXPECT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_EQ(outcome.out, "{}\n");
}

// A typo must not read as a deletion.
TEST_F(Blkctl, DeleteOfAVolumeThatDoesNotExistFailsNamingIt) {
  Outcome outcome = RunAgainstAgent({"delete-volume", "typo"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_EQ(outcome.err,
            "blkctl: NOT_FOUND: volume 'typo' does not exist; nothing deleted (with --if-exists "
            "that is not an error)\n");
  EXPECT_THAT(outcome.out, IsEmpty());
}

TEST_F(Blkctl, DeleteIfExistsOfAVolumeThatDoesNotExistSucceedsSayingSo) {
  Outcome outcome = RunAgainstAgent({"delete-volume", "typo", "--if-exists"});
  EXPECT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_EQ(outcome.out, "volume typo does not exist; nothing to delete\n");
  EXPECT_THAT(outcome.err, IsEmpty());
  Outcome json = RunAgainstAgent({"delete-volume", "typo", "--if-exists", "-o", "json"});
  EXPECT_EQ(json.exit_code, kExitOk) << json.err;
  EXPECT_EQ(json.out, "{}\n");
}

TEST_F(Blkctl, DeleteIfExistsOfAnExistingVolumeDeletesIt) {
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "v1", "--size", "64M", "--backend", "null://"}).exit_code,
      kExitOk);
  Outcome outcome = RunAgainstAgent({"delete-volume", "v1", "--if-exists"});
  EXPECT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_EQ(outcome.out, "volume v1 deleted\n");
  EXPECT_EQ(RunAgainstAgent({"get-volume", "v1"}).exit_code, kExitRpcError);
}

// Only NOT_FOUND is forgiven: any other refusal still fails the command.
TEST_F(Blkctl, DeleteIfExistsStillFailsOnOtherErrors) {
  agent_.service().FailWith(grpc::Status(grpc::StatusCode::UNAVAILABLE, "agent is restarting"));
  Outcome outcome = RunAgainstAgent({"delete-volume", "v1", "--if-exists"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_EQ(outcome.err, "blkctl: UNAVAILABLE: agent is restarting\n");
}

TEST_F(Blkctl, GetVolumeAsJsonUsesLowerCamelCaseNames) {
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "v1", "--size", "64M", "--backend", "null://"}).exit_code,
      kExitOk);
  Outcome outcome = RunAgainstAgent({"get-volume", "v1", "-o", "json"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_THAT(outcome.out, HasSubstr("\"devicePath\": \"/dev/ublkb0\""));
  EXPECT_THAT(outcome.out, HasSubstr("\"sizeBytes\": \"67108864\""));
}

TEST_F(Blkctl, GetVolumeOfUnknownIdIsNotFound) {
  Outcome outcome = RunAgainstAgent({"get-volume", "nope"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_EQ(outcome.err, "blkctl: NOT_FOUND: volume nope not found\n");
}

TEST_F(Blkctl, ListVolumesPrintsATable) {
  ASSERT_EQ(
      RunAgainstAgent({"create-volume", "a", "--size", "4K", "--backend", "null://"}).exit_code,
      kExitOk);
  ASSERT_EQ(RunAgainstAgent({"create-volume", "b", "--size", "2G", "--backend", "file:///b.img",
                             "--queues", "4"})
                .exit_code,
            kExitOk);
  Outcome outcome = RunAgainstAgent({"list-volumes"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_EQ(outcome.out,
            "ID  SIZE  BACKEND        DEVICE       STATE  QUEUES  DEPTH\n"
            "a   4KiB  null://        /dev/ublkb0  live   1       128\n"
            "b   2GiB  file:///b.img  /dev/ublkb1  live   4       128\n");
}

TEST_F(Blkctl, NodeInfoPrintsKernelAndFeatures) {
  Outcome outcome = RunAgainstAgent({"node-info"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_THAT(outcome.out, HasSubstr("ublk features:  0x6 (COMP_IN_TASK, NEED_GET_DATA)\n"));
  Outcome json = RunAgainstAgent({"node-info", "--output", "JSON"});
  ASSERT_EQ(json.exit_code, kExitOk) << json.err;
  EXPECT_THAT(json.out, HasSubstr("\"ublkFeatureNames\": ["));
  EXPECT_THAT(json.out, HasSubstr("\"kernelRelease\": \"6.12.12-amd64\""));
}

TEST_F(Blkctl, GlobalOptionsMayFollowTheCommand) {
  Outcome outcome = RunWith({"list-volumes", "--socket", agent_.socket_path(), "--timeout", "5s"});
  EXPECT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_THAT(agent_.service().methods(), ElementsAre("ListVolumes"));
}

TEST_F(Blkctl, TimeoutBoundsTheWaitForAHungAgent) {
  agent_.service().HangUntilCancelled();
  Outcome outcome = RunAgainstAgent({"--timeout", "300ms", "node-info"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_THAT(outcome.err, StartsWith("blkctl: DEADLINE_EXCEEDED: "));
}

TEST_F(Blkctl, StatsPrintsAHeaderAndOneLinePerInterval) {
  RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://"});
  Outcome outcome = RunAgainstAgent({"stats", "v1", "--interval", "10ms", "--count", "2"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  std::vector<std::string> lines = absl::StrSplit(outcome.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << outcome.out;
  EXPECT_THAT(lines[0], StartsWith("TIME"));
  EXPECT_THAT(lines[0], HasSubstr("r/s"));
  EXPECT_THAT(lines[0], HasSubstr("p99_lat"));
  EXPECT_THAT(lines[0], HasSubstr("thr/s"));
  // 100 reads per interval of about 10 ms; the in-flight count is the agent's, and so are the
  // 10 requests held back per interval, 5 ms each.
  std::vector<std::string> fields = absl::StrSplit(lines[1], ' ', absl::SkipEmpty());
  ASSERT_EQ(fields.size(), 11u) << lines[1];
  double reads_per_second = 0;
  ASSERT_TRUE(absl::SimpleAtod(fields[1], &reads_per_second)) << lines[1];
  EXPECT_GT(reads_per_second, 0);
  EXPECT_EQ(fields[2], "0.0");  // the failed write happened before the first snapshot
  EXPECT_EQ(fields[8], "7");
  double held_per_second = 0;
  ASSERT_TRUE(absl::SimpleAtod(fields[9], &held_per_second)) << lines[1];
  EXPECT_GT(held_per_second, 0);
  EXPECT_EQ(fields[10], "5.0ms");
}

TEST_F(Blkctl, StatsAsJsonIsOneObjectPerInterval) {
  RunAgainstAgent({"create-volume", "v1", "--size", "1G", "--backend", "null://"});
  Outcome outcome =
      RunAgainstAgent({"stats", "v1", "--interval", "10ms", "--count", "1", "-o", "json"});
  ASSERT_EQ(outcome.exit_code, kExitOk) << outcome.err;
  EXPECT_THAT(outcome.out, StartsWith("{\"volumeId\":\"v1\","));
  EXPECT_THAT(outcome.out, HasSubstr("\"inflightIos\":7,"));
  EXPECT_THAT(outcome.out, HasSubstr("\"avgThrottleWaitSeconds\":0.005}\n"));
  EXPECT_THAT(outcome.out, HasSubstr("\"readIops\":"));
  EXPECT_EQ(std::count(outcome.out.begin(), outcome.out.end(), '\n'), 1);
}

TEST_F(Blkctl, StatsOfUnknownVolumeIsNotFound) {
  Outcome outcome = RunAgainstAgent({"stats", "nope", "--count", "1"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_THAT(outcome.err, StartsWith("blkctl: NOT_FOUND: volume 'nope' does not exist"));
  EXPECT_THAT(outcome.out, IsEmpty());
}

TEST(BlkctlUnreachable, NamesTheSocketAndExitsOne) {
  testing::TempDir dir;
  const std::string socket = dir.path() + "/nobody.sock";
  Outcome outcome = RunWith({"--socket", socket, "list-volumes"});
  EXPECT_EQ(outcome.exit_code, kExitRpcError);
  EXPECT_THAT(outcome.err, StartsWith("blkctl: UNAVAILABLE: cannot reach blkagent at " + socket));
  EXPECT_THAT(outcome.out, IsEmpty());
}

// Usage errors: exit 2, a message naming the problem, and no RPC at all.
struct UsageCase {
  std::string name;
  std::vector<std::string> args;
  std::string message;
};

void PrintTo(const UsageCase& usage, std::ostream* os) { *os << usage.name; }

class BlkctlUsageError : public ::testing::TestWithParam<UsageCase> {};

TEST_P(BlkctlUsageError, ExitsTwoBeforeAnyRpc) {
  testing::FakeAgent agent;
  std::vector<std::string> args = {"--socket", agent.socket_path()};
  args.insert(args.end(), GetParam().args.begin(), GetParam().args.end());
  Outcome outcome = RunWith(args);
  EXPECT_EQ(outcome.exit_code, kExitUsage);
  EXPECT_THAT(outcome.err, StartsWith("blkctl: "));
  EXPECT_THAT(outcome.err, HasSubstr(GetParam().message));
  EXPECT_EQ(agent.service().calls(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Flags, BlkctlUsageError,
    ::testing::Values(
        UsageCase{"NoCommand", {}, "a command is required"},
        UsageCase{"UnknownCommand", {"snapshot-volume", "v1"}, "snapshot-volume"},
        UsageCase{"ResizeWithoutSize", {"resize-volume", "v1"}, "--size"},
        UsageCase{"ResizeWithBadSize",
                  {"resize-volume", "v1", "--size", "1.5G"},
                  "invalid size '1.5G': fractions"},
        UsageCase{"MissingSize",
                  {"create-volume", "v1", "--backend", "null://"},
                  "--size: is required for null:// and file:// backends"},
        UsageCase{"MissingSizeForFile",
                  {"create-volume", "v1", "--backend", "file:///v1.img"},
                  "--size: is required for null:// and file:// backends"},
        UsageCase{"MissingBackend", {"create-volume", "v1", "--size", "1G"}, "--backend"},
        UsageCase{"MissingId", {"create-volume", "--size", "1G", "--backend", "null://"}, "ID"},
        UsageCase{"BadSize",
                  {"create-volume", "v1", "--size", "1.5G", "--backend", "null://"},
                  "invalid size '1.5G': fractions"},
        UsageCase{
            "NegativeSize", {"create-volume", "v1", "--size", "-1", "--backend", "null://"}, "-1"},
        UsageCase{
            "BadBlockSize",
            {"create-volume", "v1", "--size", "1G", "--backend", "null://", "--block-size", "1000"},
            "--block-size: 1000 not in {512,4096}"},
        UsageCase{"ZeroQueues",
                  {"create-volume", "v1", "--size", "1G", "--backend", "null://", "--queues", "0"},
                  "--queues: expected a whole number from 1 to 4294967295, got '0'"},
        UsageCase{"NegativeQueues",
                  {"create-volume", "v1", "--size", "1G", "--backend", "null://", "--queues", "-1"},
                  "got '-1'"},
        UsageCase{"NonNumericDepth",
                  {"create-volume", "v1", "--size", "1G", "--backend", "null://", "--queue-depth",
                   "deep"},
                  "--queue-depth"},
        UsageCase{"UnknownScheme",
                  {"create-volume", "v1", "--size", "1G", "--backend", "iscsi://h/e"},
                  "unknown backend scheme 'iscsi' in 'iscsi://h/e' (supported: null, file, nbd, "
                  "nbd+unix, nvme, nvme-tcp)"},
        UsageCase{
            "ZeroIoTimeout",
            {"create-volume", "v1", "--size", "1G", "--backend", "nbd://h/", "--io-timeout", "0"},
            "--io-timeout"},
        UsageCase{"RelativeFilePath",
                  {"create-volume", "v1", "--size", "1G", "--backend", "file://x.img"},
                  "three slashes"},
        UsageCase{"UnknownOutputFormat", {"list-volumes", "-o", "yaml"}, "yaml"},
        UsageCase{"ZeroTimeout", {"--timeout", "0", "node-info"}, "must be positive"},
        UsageCase{"GarbageTimeout", {"--timeout", "soon", "node-info"}, "invalid timeout 'soon'"},
        UsageCase{"ExtraArgument", {"get-volume", "a", "b"}, "b"},
        UsageCase{"ForceOnGet", {"get-volume", "a", "--force"}, "--force"},
        UsageCase{"ZeroInterval",
                  {"stats", "a", "--interval", "0"},
                  "invalid interval '0': must be positive"},
        UsageCase{"ZeroCount", {"stats", "a", "--count", "0"}, "--count"},
        UsageCase{"StatsWithoutId", {"stats"}, "ID"},
        UsageCase{"UpdateWithoutTunable", {"update-volume", "a"}, "needs a tunable to change"},
        UsageCase{
            "NegativeRqAffinity", {"update-volume", "a", "--rq-affinity", "-1"}, "--rq-affinity"},
        UsageCase{
            "NegativeIops",
            {"create-volume", "v1", "--size", "1G", "--backend", "null://", "--read-iops", "-5"},
            "--read-iops: limit '-5' (N[:BURST]): invalid count '-5': negative"},
        UsageCase{
            "MalformedIops", {"update-volume", "a", "--iops", "fast"}, "--iops: limit 'fast'"},
        UsageCase{"MalformedIopsBurst",
                  {"update-volume", "a", "--write-iops", "100:x"},
                  "--write-iops: limit '100:x' (N[:BURST]): burst: invalid count 'x'"},
        UsageCase{"AmbiguousBps",
                  {"create-volume", "v1", "--size", "1G", "--backend", "null://", "--bps", "50MB"},
                  "--bps: limit '50MB' (SIZE[:BURST]): invalid size '50MB': ambiguous suffix"},
        UsageCase{"NegativeBpsBurst",
                  {"update-volume", "a", "--read-bps", "1M:-1"},
                  "burst: invalid size '-1': negative"},
        UsageCase{"FractionalWriteBps",
                  {"update-volume", "a", "--write-bps", "1.5M"},
                  "--write-bps: limit '1.5M'"},
        UsageCase{"NoLimitsOnCreate",
                  {"create-volume", "v1", "--size", "1G", "--backend", "null://", "--no-limits"},
                  "--no-limits"},
        UsageCase{"NonNumericRqAffinity",
                  {"create-volume", "v1", "--size", "1G", "--backend", "null://", "--rq-affinity",
                   "same"},
                  "--rq-affinity"}),
    [](const ::testing::TestParamInfo<UsageCase>& info) { return info.param.name; });

TEST(BlkctlHelp, ExitsZeroAndListsTheCommands) {
  Outcome outcome = RunWith({"--help"});
  EXPECT_EQ(outcome.exit_code, kExitOk);
  for (const char* command : {"create-volume", "update-volume", "delete-volume", "get-volume",
                              "list-volumes", "node-info", "stats"}) {
    EXPECT_THAT(outcome.out, HasSubstr(command));
  }
}

TEST(BlkctlHelp, OfACommandDescribesItsFlags) {
  Outcome outcome = RunWith({"create-volume", "--help"});
  EXPECT_EQ(outcome.exit_code, kExitOk);
  EXPECT_THAT(outcome.out, HasSubstr("--block-size"));
  EXPECT_THAT(outcome.out, HasSubstr("--read-only"));
}

TEST(ParseTimeout, AcceptsSecondsAndDurations) {
  EXPECT_EQ(ParseTimeout("60").value(), absl::Seconds(60));
  EXPECT_EQ(ParseTimeout("90s").value(), absl::Seconds(90));
  EXPECT_EQ(ParseTimeout("1m30s").value(), absl::Seconds(90));
  EXPECT_EQ(ParseTimeout("500ms").value(), absl::Milliseconds(500));
  EXPECT_FALSE(ParseTimeout("-1s").ok());
  EXPECT_FALSE(ParseTimeout("inf").ok());
  EXPECT_FALSE(ParseTimeout("").ok());
}

}  // namespace
}  // namespace blk::cli
