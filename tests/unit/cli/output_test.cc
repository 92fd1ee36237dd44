#include "cli/output.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace blk::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

blk::v1::Volume LiveFileVolume() {
  blk::v1::Volume volume;
  volume.set_id("data-1");
  volume.set_size_bytes(64ull << 20);
  volume.set_logical_block_size(4096);
  volume.set_queues(2);
  volume.set_queue_depth(64);
  volume.mutable_file()->set_path("/var/lib/blk/data 1.img");
  volume.mutable_status()->set_state(blk::v1::VOLUME_STATE_LIVE);
  volume.mutable_status()->set_device_path("/dev/ublkb3");
  volume.mutable_status()->set_device_id(3);
  return volume;
}

blk::v1::Volume FailedNullVolume() {
  blk::v1::Volume volume;
  volume.set_id("scratch");
  volume.set_size_bytes(1536ull << 20);
  volume.set_read_only(true);
  volume.mutable_null();
  volume.mutable_status()->set_state(blk::v1::VOLUME_STATE_FAILED);
  volume.mutable_status()->set_device_id(-1);
  volume.mutable_status()->set_message("ADD_DEV: Operation not permitted");
  return volume;
}

TEST(StateName, IsTheLowercaseStateWithoutPrefix) {
  EXPECT_EQ(StateName(blk::v1::VOLUME_STATE_CREATING), "creating");
  EXPECT_EQ(StateName(blk::v1::VOLUME_STATE_LIVE), "live");
  EXPECT_EQ(StateName(blk::v1::VOLUME_STATE_DELETING), "deleting");
  EXPECT_EQ(StateName(blk::v1::VOLUME_STATE_FAILED), "failed");
  EXPECT_EQ(StateName(blk::v1::VOLUME_STATE_UNSPECIFIED), "unknown");
}

TEST(RenderVolumeTable, AlignsColumnsAndFillsDocumentedDefaults) {
  google::protobuf::RepeatedPtrField<blk::v1::Volume> volumes;
  *volumes.Add() = LiveFileVolume();
  *volumes.Add() = FailedNullVolume();
  EXPECT_EQ(
      RenderVolumeTable(volumes),
      "ID       SIZE    BACKEND                           DEVICE       STATE   QUEUES  DEPTH\n"
      "data-1   64MiB   file:///var/lib/blk/data%201.img  /dev/ublkb3  live    2       64\n"
      "scratch  1.5GiB  null://                           -            failed  1       128\n");
}

TEST(RenderVolumeTable, WithoutVolumesIsJustTheHeader) {
  EXPECT_EQ(RenderVolumeTable({}), "ID  SIZE  BACKEND  DEVICE  STATE  QUEUES  DEPTH\n");
}

TEST(RenderVolume, ListsEveryFieldOnePerLine) {
  EXPECT_EQ(RenderVolume(LiveFileVolume()),
            "id:           data-1\n"
            "size:         64MiB (67108864 bytes)\n"
            "backend:      file:///var/lib/blk/data%201.img\n"
            "block size:   4096\n"
            "queues:       2\n"
            "queue depth:  64\n"
            "read only:    no\n"
            "fail fast:    no\n"
            "placement:    node\n"
            "rq affinity:  - (kernel default)\n"
            "limits:       none\n"
            "state:        live\n"
            "device:       /dev/ublkb3\n"
            "device id:    3\n"
            "rq redirect:  no\n"
            "throttled:    0 requests, 0.000 s\n");
}

TEST(RenderVolume, ShowsRqAffinityReadBackAndWhatWasAsked) {
  blk::v1::Volume volume = LiveFileVolume();
  volume.set_placement("0,2-3");
  volume.set_rq_affinity(2);
  volume.mutable_status()->set_rq_affinity(2);
  volume.mutable_status()->set_rq_affinity_redirected(true);
  std::string rendered = RenderVolume(volume);
  EXPECT_THAT(rendered, HasSubstr("placement:    0,2-3\n"));
  EXPECT_THAT(rendered, HasSubstr("rq affinity:  2\n"));
  EXPECT_THAT(rendered, HasSubstr("rq redirect:  yes\n"));
  volume.mutable_status()->set_rq_affinity(1);  // someone wrote sysfs behind the agent's back
  EXPECT_THAT(RenderVolume(volume), HasSubstr("rq affinity:  1 (requested 2)\n"));
  volume.mutable_status()->clear_rq_affinity();
  EXPECT_THAT(RenderVolume(volume), HasSubstr("rq affinity:  - (requested 2)\n"));
}

TEST(RenderVolume, ShowsTheLimitsThatAreSetAndWhatTheyHeldBack) {
  blk::v1::Volume volume = LiveFileVolume();
  blk::v1::VolumeLimits& limits = *volume.mutable_limits();
  limits.mutable_read_iops()->set_rate(1000);
  limits.mutable_read_iops()->set_burst(100);
  limits.mutable_write_iops();  // present, but unlimited
  limits.mutable_write_bytes_per_second()->set_rate(10 << 20);
  limits.mutable_write_bytes_per_second()->set_burst(1 << 30);
  limits.mutable_total_bytes_per_second()->set_rate(50 << 20);
  volume.mutable_status()->set_throttled_requests(1);
  volume.mutable_status()->set_throttled_nanoseconds(2'500'000'000);
  const std::string text = RenderVolume(volume);
  EXPECT_THAT(text, HasSubstr("limits:       read 1000 iops (burst 100), write 10MiB/s (burst "
                              "1GiB), total 50MiB/s\n"));
  EXPECT_THAT(text, HasSubstr("throttled:    1 request, 2.500 s\n"));
  volume.mutable_limits()->Clear();
  volume.mutable_limits()->mutable_total_iops()->set_rate(20000);
  EXPECT_THAT(RenderVolume(volume), HasSubstr("limits:       total 20000 iops\n"));
}

TEST(RenderVolume, ShowsAnNvmeVolumesOffsetPollAndCopyMode) {
  blk::v1::Volume volume;
  volume.set_id("n1");
  volume.set_size_bytes(1 << 20);
  volume.set_logical_block_size(4096);
  volume.set_poll(true);
  volume.mutable_nvme()->set_path("/dev/ng0n1");
  volume.mutable_nvme()->set_offset_bytes(1 << 20);
  volume.mutable_status()->set_state(blk::v1::VOLUME_STATE_LIVE);
  volume.mutable_status()->set_device_path("/dev/ublkb0");
  volume.mutable_status()->set_copy_mode("zero_copy");
  volume.mutable_status()->set_io_mode("batch");
  const std::string text = RenderVolume(volume);
  EXPECT_THAT(text, HasSubstr("backend:      nvme:///dev/ng0n1?offset=1048576\n"));
  EXPECT_THAT(text, HasSubstr("poll:         yes\n"));
  EXPECT_THAT(text, HasSubstr("copy mode:    zero_copy\n"));
  EXPECT_THAT(text, HasSubstr("io mode:      batch\n"));
}

TEST(RenderVolume, ShowsAnNvmeTcpVolumesUriLivePathsAndFailovers) {
  blk::v1::Volume volume;
  volume.set_id("t1");
  volume.set_size_bytes(1 << 20);
  volume.mutable_nvme()->set_path("/dev/ng2n1");
  blk::v1::NvmeFabric& fabric = *volume.mutable_nvme()->mutable_fabric();
  fabric.set_subsystem_nqn("nqn.2014-08.org.example:array1");
  fabric.set_nsid(1);
  fabric.add_paths("10.0.0.5:4420");
  fabric.add_paths("10.0.1.5:4420");
  fabric.set_io_timeout_seconds(30);
  volume.mutable_status()->set_state(blk::v1::VOLUME_STATE_LIVE);
  volume.mutable_status()->set_nvme_paths_live(1);
  volume.mutable_status()->set_nvme_paths_total(2);
  volume.mutable_status()->set_nvme_failovers(17);
  const std::string text = RenderVolume(volume);
  EXPECT_THAT(text, HasSubstr("backend:      nvme-tcp://10.0.0.5:4420/"
                              "nqn.2014-08.org.example:array1?nsid=1&path=10.0.1.5:4420"
                              "&io_timeout=30\n"));
  EXPECT_THAT(text, HasSubstr("paths:        1/2 live\n"));
  EXPECT_THAT(text, HasSubstr("failovers:    17\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("reconnects")));
}

TEST(RenderVolume, ALocalNvmeVolumeShowsNoPaths) {
  blk::v1::Volume volume;
  volume.set_id("n1");
  volume.set_size_bytes(1 << 20);
  volume.mutable_nvme()->set_path("/dev/ng0n1");
  const std::string text = RenderVolume(volume);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("paths")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("failovers")));
}

TEST(RenderVolume, ShowsTheStatusMessageOfAFailedVolume) {
  EXPECT_EQ(RenderVolume(FailedNullVolume()),
            "id:           scratch\n"
            "size:         1.5GiB (1610612736 bytes)\n"
            "backend:      null://\n"
            "block size:   512\n"
            "queues:       1\n"
            "queue depth:  128\n"
            "read only:    yes\n"
            "fail fast:    no\n"
            "placement:    node\n"
            "rq affinity:  - (kernel default)\n"
            "limits:       none\n"
            "state:        failed\n"
            "device:       -\n"
            "message:      ADD_DEV: Operation not permitted\n");
}

TEST(RenderVolume, ShowsDegradedStateAndNbdFaultCounts) {
  blk::v1::Volume volume;
  volume.set_id("remote");
  volume.set_size_bytes(1 << 20);
  volume.mutable_nbd()->set_uri("nbd://127.0.0.1/export");
  volume.mutable_status()->set_state(blk::v1::VOLUME_STATE_DEGRADED);
  volume.mutable_status()->set_reconnects(3);
  volume.mutable_status()->set_server_errors(7);
  volume.mutable_status()->set_protocol_errors(2);
  volume.mutable_status()->set_io_timeouts(5);
  volume.mutable_status()->set_unflushed_losses(1);
  const std::string rendered = RenderVolume(volume);
  EXPECT_THAT(rendered, ::testing::HasSubstr("state:            degraded\n"));
  EXPECT_THAT(rendered, ::testing::HasSubstr("reconnects:       3\n"));
  EXPECT_THAT(rendered, ::testing::HasSubstr("server errors:    7\n"));
  EXPECT_THAT(rendered, ::testing::HasSubstr("protocol errors:  2\n"));
  EXPECT_THAT(rendered, ::testing::HasSubstr("io timeouts:      5\n"));
  EXPECT_THAT(rendered, ::testing::HasSubstr("flush losses:     1\n"));
}

TEST(RenderVolume, OtherBackendsShowNoNbdCounts) {
  blk::v1::Volume volume;
  volume.set_id("local");
  volume.set_size_bytes(1 << 20);
  volume.mutable_null();
  const std::string rendered = RenderVolume(volume);
  EXPECT_THAT(rendered, ::testing::Not(::testing::HasSubstr("reconnects")));
  EXPECT_THAT(rendered, ::testing::Not(::testing::HasSubstr("errors")));
}

TEST(RenderNodeInfo, JoinsFeatureNamesWithCommas) {
  blk::v1::GetNodeInfoResponse info;
  info.set_kernel_release("6.12.12-amd64");
  info.set_ublk_available(true);
  info.set_ublk_features(0x1fe);
  info.add_ublk_feature_names("COMP_IN_TASK");
  info.add_ublk_feature_names("NEED_GET_DATA");
  info.add_ublk_feature_names("USER_RECOVERY");
  info.set_cpu_count(2);
  info.set_agent_version("0.1.0");
  info.set_bpf_locality_available(true);
  info.set_bpf_locality_message("counting");
  EXPECT_EQ(RenderNodeInfo(info),
            "kernel:         6.12.12-amd64\n"
            "ublk:           available\n"
            "ublk features:  0x1fe (COMP_IN_TASK, NEED_GET_DATA, USER_RECOVERY)\n"
            "cpus:           2\n"
            "agent version:  0.1.0\n"
            "bpf locality:   available (counting)\n");
}

TEST(RenderNodeInfo, SaysWhyBpfLocalityIsMissing) {
  blk::v1::GetNodeInfoResponse info;
  info.set_bpf_locality_message("disabled by --bpf-locality off");
  EXPECT_THAT(RenderNodeInfo(info),
              HasSubstr("bpf locality:   not available: disabled by --bpf-locality off\n"));
}

TEST(RenderNodeInfo, SaysWhenUblkIsMissing) {
  blk::v1::GetNodeInfoResponse info;
  info.set_kernel_release("6.1.0-28-amd64");
  info.set_cpu_count(4);
  EXPECT_THAT(RenderNodeInfo(info), HasSubstr("ublk:           not available\n"
                                              "ublk features:  0x0\n"));
}

TEST(RenderJson, UsesLowerCamelCaseFieldNames) {
  blk::v1::GetVolumeResponse response;
  *response.mutable_volume() = LiveFileVolume();
  absl::StatusOr<std::string> json = RenderJson(response);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"devicePath\": \"/dev/ublkb3\""));
  EXPECT_THAT(*json, HasSubstr("\"sizeBytes\": \"67108864\""));
  EXPECT_THAT(*json, HasSubstr("\"logicalBlockSize\": 4096"));
  EXPECT_THAT(*json, HasSubstr("\"state\": \"VOLUME_STATE_LIVE\""));
  EXPECT_THAT(*json, Not(HasSubstr("device_path")));
  EXPECT_EQ(json->back(), '\n');
}

TEST(RenderJson, LeavesOutFieldsAtTheirDefault) {
  blk::v1::GetVolumeResponse response;
  *response.mutable_volume() = FailedNullVolume();
  absl::StatusOr<std::string> json = RenderJson(response);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, Not(HasSubstr("queues")));
  EXPECT_THAT(*json, Not(HasSubstr("devicePath")));
  EXPECT_THAT(*json, HasSubstr("\"null\": {}"));
}

TEST(RenderJson, ParsesBackIntoTheSameMessage) {
  blk::v1::ListVolumesResponse response;
  *response.add_volumes() = LiveFileVolume();
  *response.add_volumes() = FailedNullVolume();
  absl::StatusOr<std::string> json = RenderJson(response);
  ASSERT_TRUE(json.ok()) << json.status();
  blk::v1::ListVolumesResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), response.SerializeAsString());
}

}  // namespace
}  // namespace blk::cli
