#include "agent/volumes/volume_validation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

namespace blk::agent {
namespace {

using ::testing::HasSubstr;

v1::Volume NullVolume() {
  v1::Volume volume;
  volume.set_id("vol-1");
  volume.set_size_bytes(64 << 20);
  volume.mutable_null();
  return NormalizeVolumeSpec(volume);
}

void ExpectInvalid(const v1::Volume& spec, std::string_view field) {
  absl::Status status = ValidateVolumeSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(std::string(field))) << status;
}

v1::Volume NvmeVolume() {
  v1::Volume volume;
  volume.set_id("vol-1");
  volume.mutable_nvme()->set_path("/dev/ng0n1");
  return NormalizeVolumeSpec(volume);
}

TEST(NvmeVolumeValidation, SizeAndBlockSizeMayBeLeftToTheNamespace) {
  v1::Volume spec = NvmeVolume();
  EXPECT_EQ(spec.logical_block_size(), 0u);
  EXPECT_TRUE(ValidateVolumeSpec(spec).ok()) << ValidateVolumeSpec(spec);
}

TEST(NvmeVolumeValidation, RejectsAMissingOrRelativePathAndAnOddOffset) {
  v1::Volume spec = NvmeVolume();
  spec.mutable_nvme()->set_path("");
  ExpectInvalid(spec, "volume.nvme.path");
  spec.mutable_nvme()->set_path("dev/ng0n1");
  ExpectInvalid(spec, "volume.nvme.path");
  spec = NvmeVolume();
  spec.mutable_nvme()->set_offset_bytes(100);
  ExpectInvalid(spec, "volume.nvme.offset_bytes");
}

TEST(VolumeIdTest, AcceptsDnsLabels) {
  EXPECT_TRUE(IsValidVolumeId("a"));
  EXPECT_TRUE(IsValidVolumeId("pvc-0a1b2c"));
  EXPECT_TRUE(IsValidVolumeId(std::string(63, 'x')));
}

TEST(VolumeIdTest, RejectsEverythingElse) {
  EXPECT_FALSE(IsValidVolumeId(""));
  EXPECT_FALSE(IsValidVolumeId(std::string(64, 'x')));
  EXPECT_FALSE(IsValidVolumeId("Upper"));
  EXPECT_FALSE(IsValidVolumeId("-leading"));
  EXPECT_FALSE(IsValidVolumeId("trailing-"));
  EXPECT_FALSE(IsValidVolumeId("under_score"));
  EXPECT_FALSE(IsValidVolumeId("dot.ted"));
  EXPECT_FALSE(IsValidVolumeId("../etc"));
}

TEST(NormalizeVolumeSpecTest, FillsDefaultsAndDropsStatus) {
  v1::Volume requested;
  requested.set_id("v");
  requested.mutable_status()->set_device_path("/dev/ublkb9");
  v1::Volume spec = NormalizeVolumeSpec(requested);
  EXPECT_EQ(spec.logical_block_size(), 512u);
  EXPECT_EQ(spec.queues(), 1u);
  EXPECT_EQ(spec.queue_depth(), 128u);
  EXPECT_FALSE(spec.has_status());
}

TEST(ValidateVolumeSpecTest, AcceptsAValidNullVolume) {
  EXPECT_TRUE(ValidateVolumeSpec(NullVolume()).ok());
}

TEST(ValidateVolumeSpecTest, RejectsBadIdNamingTheField) {
  v1::Volume spec = NullVolume();
  spec.set_id("Bad_Id");
  ExpectInvalid(spec, "volume.id");
}

TEST(ValidateVolumeSpecTest, RejectsZeroSize) {
  v1::Volume spec = NullVolume();
  spec.set_size_bytes(0);
  ExpectInvalid(spec, "volume.size_bytes");
}

TEST(ValidateVolumeSpecTest, RejectsSizeNotMultipleOfBlockSize) {
  v1::Volume spec = NullVolume();
  spec.set_logical_block_size(4096);
  spec.set_size_bytes(4096 * 10 + 512);
  ExpectInvalid(spec, "multiple of the logical block size 4096");
}

TEST(ValidateVolumeSpecTest, RejectsBlockSizeOtherThan512Or4096) {
  v1::Volume spec = NullVolume();
  spec.set_logical_block_size(1024);
  ExpectInvalid(spec, "volume.logical_block_size");
}

TEST(ValidateVolumeSpecTest, RejectsTooManyQueuesAndTooDeepQueues) {
  v1::Volume spec = NullVolume();
  spec.set_queues(kMaxQueues + 1);
  ExpectInvalid(spec, "volume.queues");
  spec = NullVolume();
  spec.set_queue_depth(kMaxQueueDepth + 1);
  ExpectInvalid(spec, "volume.queue_depth");
}

TEST(ValidateVolumeSpecTest, RequiresABackend) {
  v1::Volume spec = NullVolume();
  spec.clear_backend();
  ExpectInvalid(spec, "volume.backend");
}

TEST(ValidateVolumeSpecTest, FileBackendNeedsAnAbsolutePathInAnExistingDirectory) {
  testing::TempDir dir;
  v1::Volume spec = NullVolume();
  spec.mutable_file()->set_path(dir.path() + "/image");
  EXPECT_TRUE(ValidateVolumeSpec(spec).ok());

  spec.mutable_file()->set_path("relative/image");
  ExpectInvalid(spec, "not absolute");
  spec.mutable_file()->set_path(dir.path() + "/missing/image");
  ExpectInvalid(spec, "does not exist");
  spec.mutable_file()->set_path("");
  ExpectInvalid(spec, "volume.file.path");
  spec.mutable_file()->set_path(dir.path());
  ExpectInvalid(spec, "neither a regular file nor a block device");
}

}  // namespace
}  // namespace blk::agent

namespace blk::agent {
namespace {

v1::Volume NbdVolume(const std::string& uri) {
  v1::Volume volume;
  volume.set_id("remote-1");
  volume.set_size_bytes(64 << 20);
  volume.mutable_nbd()->set_uri(uri);
  return NormalizeVolumeSpec(volume);
}

TEST(ValidateVolumeSpecTest, OnlyAnNbdVolumeMayOmitItsSize) {
  v1::Volume nbd = NbdVolume("nbd://127.0.0.1:10809/");
  nbd.set_size_bytes(0);
  EXPECT_TRUE(ValidateVolumeSpec(nbd).ok());
  v1::Volume null = nbd;
  null.mutable_null();
  ExpectInvalid(null, "volume.size_bytes");
}

TEST(ValidateVolumeSpecTest, NbdBackendTakesTcpAndUnixUris) {
  EXPECT_TRUE(ValidateVolumeSpec(NbdVolume("nbd://127.0.0.1:10809/")).ok());
  EXPECT_TRUE(ValidateVolumeSpec(NbdVolume("nbd+unix:///disk?socket=/run/nbd.sock")).ok());
}

TEST(ValidateVolumeSpecTest, NbdBackendRefusesMalformedUrisNamingTheField) {
  for (const char* uri : {"", "nbd://", "nbd://h:0/", "nbd+unix:///x", "http://h/"}) {
    SCOPED_TRACE(uri);
    v1::Volume spec = NbdVolume(uri);
    ExpectInvalid(spec, "volume.nbd.uri");
  }
}

TEST(NormalizeVolumeSpecTest, NbdIoTimeoutDefaultsTo30Seconds) {
  EXPECT_EQ(NbdVolume("nbd://h/").nbd().io_timeout_seconds(), 30u);
  v1::Volume volume = NbdVolume("nbd://h/");
  volume.mutable_nbd()->set_io_timeout_seconds(5);
  EXPECT_EQ(NormalizeVolumeSpec(volume).nbd().io_timeout_seconds(), 5u);
}

TEST(ValidateVolumeSpecTest, NbdIoTimeoutIsBounded) {
  v1::Volume spec = NbdVolume("nbd://h/");
  spec.mutable_nbd()->set_io_timeout_seconds(7 * 24 * 3600);
  ExpectInvalid(spec, "volume.nbd.io_timeout_seconds");
}

}  // namespace
}  // namespace blk::agent
