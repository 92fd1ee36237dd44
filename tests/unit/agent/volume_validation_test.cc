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

namespace blk::agent {
namespace {

v1::Volume ValidFabricSpec() {
  v1::Volume volume;
  volume.set_id("remote-nvme");
  volume.set_size_bytes(1 << 30);
  v1::NvmeFabric& fabric = *volume.mutable_nvme()->mutable_fabric();
  fabric.set_subsystem_nqn("nqn.2014-08.org.example:array1");
  fabric.set_nsid(1);
  fabric.add_paths("10.0.0.5:4420");
  fabric.add_paths("[fd00::5]:4420");
  fabric.add_paths("10.0.0.7:4421");
  return NormalizeVolumeSpec(volume);
}

TEST(NvmeFabricValidation, AcceptsAFullSpecAndNeedsNoLocalPath) {
  v1::Volume spec = ValidFabricSpec();
  spec.mutable_nvme()->set_offset_bytes(1 << 20);
  spec.mutable_nvme()->mutable_fabric()->set_dhchap_secret_file("/etc/blk/array1.key");
  spec.mutable_nvme()->mutable_fabric()->set_io_timeout_seconds(3600);
  EXPECT_TRUE(ValidateVolumeSpec(spec).ok()) << ValidateVolumeSpec(spec);
}

TEST(NvmeFabricValidation, OutputOnlyFieldsOfARequestAreIgnored) {
  v1::Volume spec = ValidFabricSpec();
  spec.mutable_nvme()->set_path("not even absolute, = or ,");
  spec.mutable_nvme()->mutable_fabric()->add_agent_connected_paths("garbage,traddr=1.2.3.4");
  EXPECT_TRUE(ValidateVolumeSpec(spec).ok()) << ValidateVolumeSpec(spec);
}

TEST(NormalizeVolumeSpecTest, NvmeFabricIoTimeoutDefaultsTo30SecondsAndOutputFieldsStay) {
  v1::Volume volume = ValidFabricSpec();
  EXPECT_EQ(volume.nvme().fabric().io_timeout_seconds(), 30u);
  volume.mutable_nvme()->mutable_fabric()->set_io_timeout_seconds(5);
  volume.mutable_nvme()->set_path("/dev/ng2n1");
  volume.mutable_nvme()->mutable_fabric()->add_agent_connected_paths("10.0.0.5:4420");
  const v1::Volume normalized = NormalizeVolumeSpec(volume);
  EXPECT_EQ(normalized.nvme().fabric().io_timeout_seconds(), 5u);
  EXPECT_EQ(normalized.nvme().path(), "/dev/ng2n1");
  EXPECT_EQ(normalized.nvme().fabric().agent_connected_paths_size(), 1);
  EXPECT_EQ(NvmeVolume().nvme().has_fabric(), false);
}

TEST(NormalizeVolumeSpecTest, FabricPathsTakeOneSpellingPerController) {
  v1::Volume volume = ValidFabricSpec();
  volume.mutable_nvme()->mutable_fabric()->set_paths(0, "10.0.0.5:04420");
  volume.mutable_nvme()->mutable_fabric()->set_paths(1, "[fd00:0::5]:4420");
  const v1::Volume normalized = NormalizeVolumeSpec(volume);
  EXPECT_EQ(normalized.nvme().fabric().paths(0), "10.0.0.5:4420");
  EXPECT_EQ(normalized.nvme().fabric().paths(1), "[fd00::5]:4420");
}

TEST(NvmeFabricValidation, TheNqnIsRequiredBoundedAndBeginsWithNqn) {
  v1::Volume spec = ValidFabricSpec();
  spec.mutable_nvme()->mutable_fabric()->set_subsystem_nqn("");
  ExpectInvalid(spec, "volume.nvme.fabric.subsystem_nqn: is required");
  spec.mutable_nvme()->mutable_fabric()->set_subsystem_nqn("iqn.2001-04.com.example:disk");
  ExpectInvalid(spec, "does not begin with \"nqn.\"");
  spec.mutable_nvme()->mutable_fabric()->set_subsystem_nqn("nqn." + std::string(219, 'a'));
  EXPECT_TRUE(ValidateVolumeSpec(spec).ok()) << ValidateVolumeSpec(spec);
  spec.mutable_nvme()->mutable_fabric()->set_subsystem_nqn("nqn." + std::string(220, 'a'));
  ExpectInvalid(spec, "volume.nvme.fabric.subsystem_nqn: 224 bytes exceed the maximum of 223");
}

// SECURITY: the NQN and hosts go into "key=value,key=value" written to /dev/nvme-fabrics.
TEST(NvmeFabricValidation, NoByteOfTheNqnCanAddAFabricsOption) {
  for (const std::string& bad : std::vector<std::string>{
           ",hostnqn=nqn.evil", "=", " ", "\t", "\n", std::string(1, '\0'), "\x7f", "\xc3\xa9"}) {
    SCOPED_TRACE(bad);
    v1::Volume spec = ValidFabricSpec();
    spec.mutable_nvme()->mutable_fabric()->set_subsystem_nqn("nqn.x:a" + bad + "b");
    ExpectInvalid(spec, "volume.nvme.fabric.subsystem_nqn: byte 7 (");
  }
  v1::Volume spec = ValidFabricSpec();
  spec.mutable_nvme()->mutable_fabric()->set_subsystem_nqn("nqn.x:a,b");
  ExpectInvalid(spec, "byte 7 (',') is not allowed");
  spec.mutable_nvme()->mutable_fabric()->set_subsystem_nqn("nqn.x:a\tb");
  ExpectInvalid(spec, "byte 7 (0x09) is not allowed");
}

TEST(NvmeFabricValidation, NoHostCanAddAFabricsOption) {
  for (const std::string path :
       {"10.0.0.6,hostnqn=nqn.evil:4420", "a=b:4420", "10.0.0.6,:4420", "a b:4420", "a\tb:4420",
        "[fd00::6,]:4420", "10.0.0.6:4420,nr_io_queues=1", "10.0.0.6:44=20", "a\nb:4420"}) {
    SCOPED_TRACE(path);
    v1::Volume spec = ValidFabricSpec();
    spec.mutable_nvme()->mutable_fabric()->set_paths(1, path);
    ExpectInvalid(spec, "volume.nvme.fabric.paths[1]: '");
  }
}

TEST(NvmeFabricValidation, TheNsidIsOneNamespace) {
  v1::Volume spec = ValidFabricSpec();
  spec.mutable_nvme()->mutable_fabric()->set_nsid(0);
  ExpectInvalid(spec, "volume.nvme.fabric.nsid: is required");
  spec.mutable_nvme()->mutable_fabric()->set_nsid(0xFFFFFFFF);
  ExpectInvalid(spec, "volume.nvme.fabric.nsid: 0xffffffff");
  spec.mutable_nvme()->mutable_fabric()->set_nsid(0xFFFFFFFE);
  EXPECT_TRUE(ValidateVolumeSpec(spec).ok()) << ValidateVolumeSpec(spec);
}

TEST(NvmeFabricValidation, OneToEightPaths) {
  v1::Volume spec = ValidFabricSpec();
  spec.mutable_nvme()->mutable_fabric()->clear_paths();
  ExpectInvalid(spec, "volume.nvme.fabric.paths: at least one");
  for (int i = 0; i < 8; ++i) {
    spec.mutable_nvme()->mutable_fabric()->add_paths(absl::StrCat("10.0.0.", i + 1, ":4420"));
  }
  EXPECT_TRUE(ValidateVolumeSpec(spec).ok()) << ValidateVolumeSpec(spec);
  spec.mutable_nvme()->mutable_fabric()->add_paths("10.0.0.9:4420");
  ExpectInvalid(spec, "volume.nvme.fabric.paths: 9 paths exceed the maximum of 8");
}

TEST(NvmeFabricValidation, EachPathIsAHostAndAPort) {
  struct Case {
    std::string path;
    std::string reason;
  };
  for (const Case& bad : std::vector<Case>{
           {"10.0.0.6", "has no port"},
           {"[fd00::6]", "has no port"},
           {"10.0.0.6:", "port '' is not 1-65535"},
           {"10.0.0.6:0", "port '0' is not 1-65535"},
           {"10.0.0.6:65536", "port '65536'"},
           {"10.0.0.6:+44", "port '+44'"},
           {":4420", "host ''"},
           {"fd00::6:4420", "an IPv6 address goes in brackets"},
           {"[fd00::zz]:4420", "is not an IPv6 address in brackets"},
           {"[fe80::1%eth0]:4420", "is not an IPv6 address in brackets"},
           {"[fd00::6]x:4420", "is not an IPv6 address in brackets"},
           {"10.0.0.256:4420", "'10.0.0.256' is not an IPv4 address"},
           {"1.2.3:4420", "'1.2.3' is not an IPv4 address"},
           {"010.0.0.5:4420", "'010.0.0.5' is not an IPv4 address"},
           {"array.example:4420", "names are not resolved: give the target's address"},
           {"array_b:4420", "is not an IPv4 address or an IPv6 address in brackets"},
       }) {
    SCOPED_TRACE(bad.path);
    v1::Volume spec = ValidFabricSpec();
    spec.mutable_nvme()->mutable_fabric()->set_paths(2, bad.path);
    ExpectInvalid(spec, "volume.nvme.fabric.paths[2]: '" + bad.path + "'");
    ExpectInvalid(spec, bad.reason);
  }
}

TEST(NvmeFabricValidation, APathNamedTwiceIsRefusedHoweverItIsSpelled) {
  for (const std::string again : {"10.0.0.5:4420", "10.0.0.5:04420"}) {
    v1::Volume spec = ValidFabricSpec();
    spec.mutable_nvme()->mutable_fabric()->set_paths(2, again);
    ExpectInvalid(
        spec, "volume.nvme.fabric.paths[2]: '" + again + "' is the same controller as paths[0]");
  }
  v1::Volume spec = ValidFabricSpec();
  spec.mutable_nvme()->mutable_fabric()->set_paths(2, "[fd00:0::5]:4420");
  ExpectInvalid(spec,
                "volume.nvme.fabric.paths[2]: '[fd00:0::5]:4420' is the same controller as "
                "paths[1]");
  // Another port of the same host is another controller.
  spec = ValidFabricSpec();
  spec.mutable_nvme()->mutable_fabric()->set_paths(2, "10.0.0.5:4421");
  EXPECT_TRUE(ValidateVolumeSpec(spec).ok()) << ValidateVolumeSpec(spec);
}

TEST(NvmeFabricValidation, IoTimeoutOffsetAndSecretFile) {
  v1::Volume spec = ValidFabricSpec();
  spec.mutable_nvme()->mutable_fabric()->set_io_timeout_seconds(3601);
  ExpectInvalid(spec, "volume.nvme.fabric.io_timeout_seconds: 3601 exceeds the maximum of 3600");
  spec = ValidFabricSpec();
  spec.mutable_nvme()->set_offset_bytes(4095);
  ExpectInvalid(spec, "volume.nvme.offset_bytes");
  spec = ValidFabricSpec();
  spec.mutable_nvme()->mutable_fabric()->set_dhchap_secret_file("etc/key");
  ExpectInvalid(spec, "volume.nvme.fabric.dhchap_secret_file: 'etc/key' is not absolute");
  spec.mutable_nvme()->mutable_fabric()->set_dhchap_secret_file(std::string("/etc/k\0ey", 9));
  ExpectInvalid(spec, "volume.nvme.fabric.dhchap_secret_file: contains a NUL byte");
}

TEST(NvmeVolumeValidation, WithoutAFabricTheLocalPathIsStillRequired) {
  v1::Volume spec = ValidFabricSpec();
  spec.mutable_nvme()->clear_fabric();
  ExpectInvalid(spec, "volume.nvme.path: is required");
}

// Limits: the six rates with their bursts, checked field by field.

void ExpectValid(const v1::Volume& spec) {
  absl::Status status = ValidateVolumeSpec(spec);
  EXPECT_TRUE(status.ok()) << status;
}

void ExpectInvalidWith(const v1::Volume& spec, std::string_view message) {
  absl::Status status = ValidateVolumeSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(std::string(message))) << status;
}

TEST(LimitsValidation, UnsetLimitsAndAFullSetWithinTheBoundsAreValid) {
  ExpectValid(NullVolume());
  v1::Volume spec = NullVolume();
  v1::VolumeLimits& limits = *spec.mutable_limits();
  limits.mutable_read_iops()->set_rate(10'000'000);
  limits.mutable_write_iops()->set_rate(1);
  limits.mutable_write_iops()->set_burst(3600);
  limits.mutable_total_iops()->set_rate(1000);
  limits.mutable_total_iops()->set_burst(1);
  limits.mutable_read_bytes_per_second()->set_rate(100'000'000'000);
  limits.mutable_write_bytes_per_second()->set_rate(1 << 20);
  limits.mutable_write_bytes_per_second()->set_burst(512 * 1024);
  limits.mutable_total_bytes_per_second()->set_rate(100);  // the bucket holds a request anyway
  ExpectValid(spec);
}

TEST(LimitsValidation, RatesAboveTheMaximumAreRefusedNamingTheField) {
  v1::Volume spec = NullVolume();
  spec.mutable_limits()->mutable_total_iops()->set_rate(10'000'001);
  ExpectInvalidWith(spec,
                    "volume.limits.total_iops.rate: 10000001 exceeds the maximum of 10000000");
  spec = NullVolume();
  spec.mutable_limits()->mutable_write_bytes_per_second()->set_rate(100'000'000'001);
  ExpectInvalidWith(spec, "volume.limits.write_bytes_per_second.rate: 100000000001 exceeds");
}

TEST(LimitsValidation, ABurstWithoutARateIsRefused) {
  v1::Volume spec = NullVolume();
  spec.mutable_limits()->mutable_read_iops()->set_burst(10);
  ExpectInvalidWith(spec, "volume.limits.read_iops.burst: 10 is set without a rate");
}

TEST(LimitsValidation, ABytesBurstMustHoldTheLargestRequest) {
  v1::Volume spec = NullVolume();
  v1::RateLimit& limit = *spec.mutable_limits()->mutable_read_bytes_per_second();
  limit.set_rate(10 << 20);
  limit.set_burst(512 * 1024 - 1);
  ExpectInvalidWith(spec,
                    "volume.limits.read_bytes_per_second.burst: 524287 is below the largest "
                    "request of 524288 bytes");
  limit.set_burst(512 * 1024);
  ExpectValid(spec);
}

TEST(LimitsValidation, ABurstOfMoreThanAnHourOfItsRateIsRefused) {
  v1::Volume spec = NullVolume();
  v1::RateLimit& limit = *spec.mutable_limits()->mutable_write_iops();
  limit.set_rate(100);
  limit.set_burst(360'001);
  ExpectInvalidWith(spec,
                    "volume.limits.write_iops.burst: 360001 exceeds an hour's worth of the rate "
                    "(360000)");
  limit.set_burst(360'000);
  ExpectValid(spec);
  // The largest rate and burst do not overflow the check.
  v1::RateLimit& bytes = *spec.mutable_limits()->mutable_total_bytes_per_second();
  bytes.set_rate(100'000'000'000);
  bytes.set_burst(UINT64_MAX);
  ExpectInvalidWith(spec, "volume.limits.total_bytes_per_second.burst");
}

google::protobuf::FieldMask MaskOf(std::initializer_list<const char*> paths) {
  google::protobuf::FieldMask mask;
  for (const char* path : paths) mask.add_paths(path);
  return mask;
}

TEST(LimitsValidation, AnUpdateMayNameLimitsAloneOrWithRqAffinity) {
  v1::Volume changes;
  changes.set_id("vol-1");
  EXPECT_TRUE(ValidateVolumeUpdate(changes, MaskOf({"limits"})).ok());  // unset: unlimited
  changes.mutable_limits()->mutable_read_iops()->set_rate(500);
  EXPECT_TRUE(ValidateVolumeUpdate(changes, MaskOf({"limits"})).ok());
  // rq_affinity must be set only when the mask names it.
  absl::Status status = ValidateVolumeUpdate(changes, MaskOf({"limits", "rq_affinity"}));
  EXPECT_THAT(std::string(status.message()), HasSubstr("volume.rq_affinity: must be set"));
  changes.set_rq_affinity(2);
  EXPECT_TRUE(ValidateVolumeUpdate(changes, MaskOf({"rq_affinity", "limits"})).ok());
}

TEST(LimitsValidation, AnUpdateChecksTheLimitsLikeACreate) {
  v1::Volume changes;
  changes.set_id("vol-1");
  changes.mutable_limits()->mutable_total_iops()->set_rate(20'000'000);
  absl::Status status = ValidateVolumeUpdate(changes, MaskOf({"limits"}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("volume.limits.total_iops.rate"));
  // Limits the mask does not name are not looked at.
  changes.set_rq_affinity(1);
  EXPECT_TRUE(ValidateVolumeUpdate(changes, MaskOf({"rq_affinity"})).ok());
  status = ValidateVolumeUpdate(changes, MaskOf({"limit"}));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("update_mask: 'limit' cannot be updated (updatable: rq_affinity, limits)"));
}

}  // namespace
}  // namespace blk::agent
