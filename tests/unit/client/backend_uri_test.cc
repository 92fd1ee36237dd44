#include "client/backend_uri.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::client {
namespace {

using ::testing::HasSubstr;

TEST(ParseBackendUri, NullSchemeSelectsTheNullBackend) {
  absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri("null://");
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->backend_case(), blk::v1::Volume::kNull);
}

TEST(ParseBackendUri, SetsOnlyTheBackend) {
  absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri("file:///var/lib/blk/v1.img");
  ASSERT_TRUE(volume.ok()) << volume.status();
  blk::v1::Volume expected;
  expected.mutable_file()->set_path("/var/lib/blk/v1.img");
  EXPECT_EQ(volume->SerializeAsString(), expected.SerializeAsString());
}

TEST(ParseBackendUri, SchemeIsCaseInsensitive) {
  absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri("FILE:///dev/sdb");
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->file().path(), "/dev/sdb");
  EXPECT_TRUE(ParseBackendUri("Null://").ok());
}

TEST(ParseBackendUri, FilePathIsPercentDecoded) {
  absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri("file:///srv/a%20b%3Fc%23d%25e%2fx");
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->file().path(), "/srv/a b?c#d%e/x");
}

struct BadUri {
  std::string uri;
  std::string reason;
};

class ParseBackendUriRejects : public ::testing::TestWithParam<BadUri> {};

TEST_P(ParseBackendUriRejects, WithAMessageNamingTheUri) {
  absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri(GetParam().uri);
  ASSERT_FALSE(volume.ok()) << "accepted " << GetParam().uri;
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(volume.status().message(), HasSubstr("'" + GetParam().uri + "'"));
  EXPECT_THAT(volume.status().message(), HasSubstr(GetParam().reason));
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, ParseBackendUriRejects,
    ::testing::Values(
        BadUri{"", "no scheme"}, BadUri{"/var/lib/x.img", "no scheme"}, BadUri{"://x", "no scheme"},
        BadUri{"iscsi://h/e", "(supported: null, file, nbd, nbd+unix, nvme, nvme-tcp)"},
        BadUri{"nvme://dev/ng0n1", "nvme:///dev/ng0n1"}, BadUri{"nvme://", "no path"},
        BadUri{"nvme:///dev/ng0n1?size=1G", "only query parameter"},
        BadUri{"nvme:///dev/ng0n1?offset=1.5G", "offset:"},
        BadUri{"nvme:///dev/ng0n1?offset=", "offset:"}, BadUri{"nbd:///export", "no host"},
        BadUri{"nbd://", "no host"}, BadUri{"nbd+unix:///e", "absolute socket path"},
        BadUri{"nbd+unix:///e?socket=rel", "absolute socket path"},
        BadUri{"null://x", "nothing after null://"}, BadUri{"file://", "no path"},
        BadUri{"file://tmp/x.img", "file:///tmp/x.img"}, BadUri{"file://host", "names host 'host'"},
        BadUri{"file:///a?b", "query"}, BadUri{"file:///a#b", "fragment"},
        BadUri{"file:///a%2", "two hex digits"}, BadUri{"file:///a%zz", "two hex digits"},
        BadUri{"file:///a%", "two hex digits"}, BadUri{"file:///a%00b", "%00"},
        BadUri{"nvme:///dev/ng0n1%00", "%00"}));

INSTANTIATE_TEST_SUITE_P(
    BadNvmeTcp, ParseBackendUriRejects,
    ::testing::Values(
        BadUri{"nvme-tcp://10.0.0.5/nqn.2014-08.org.example:a1", "needs nsid=N"},
        BadUri{"nvme-tcp://10.0.0.5/nqn.2014-08.org.example:a1?path=10.0.0.6", "needs nsid=N"},
        BadUri{"nvme-tcp://10.0.0.5/nqn.x?nsid=0", "nsid '0' is not a namespace id"},
        BadUri{"nvme-tcp://10.0.0.5/nqn.x?nsid=4294967295", "nsid '4294967295'"},
        BadUri{"nvme-tcp://10.0.0.5/nqn.x?nsid=4294967296", "nsid '4294967296'"},
        BadUri{"nvme-tcp://10.0.0.5/nqn.x?nsid=+1", "nsid '+1'"},
        BadUri{"nvme-tcp://10.0.0.5/nqn.x?nsid=one", "nsid 'one'"},
        BadUri{"nvme-tcp://10.0.0.5/nqn.x?nsid=1&nsid=2", "nsid is given twice"},
        BadUri{"nvme-tcp://10.0.0.5", "no subsystem NQN (expected"},
        BadUri{"nvme-tcp://10.0.0.5/?nsid=1", "the subsystem NQN is empty"},
        BadUri{"nvme-tcp://10.0.0.5/nqn.x%zz?nsid=1", "two hex digits"},
        BadUri{"nvme-tcp://10.0.0.5/nqn.x%00?nsid=1", "%00"},
        BadUri{"nvme-tcp:///nqn.x?nsid=1", "host '' has no host"},
        BadUri{"nvme-tcp://:4420/nqn.x?nsid=1", "host ':4420' has no host"},
        BadUri{"nvme-tcp://10.0.0.5:0/nqn.x?nsid=1", "bad port '0' (expected 1-65535)"},
        BadUri{"nvme-tcp://10.0.0.5:65536/nqn.x?nsid=1", "bad port '65536'"},
        BadUri{"nvme-tcp://10.0.0.5:/nqn.x?nsid=1", "bad port ''"},
        BadUri{"nvme-tcp://10.0.0.5:44x/nqn.x?nsid=1", "bad port '44x'"},
        BadUri{"nvme-tcp://::1/nqn.x?nsid=1", "an IPv6 address goes in brackets"},
        BadUri{"nvme-tcp://[::1/nqn.x?nsid=1", "no ']' closes the IPv6 address"},
        BadUri{"nvme-tcp://[::1]4420/nqn.x?nsid=1", "after the IPv6 address"},
        BadUri{"nvme-tcp://[]/nqn.x?nsid=1", "host '[]' is not an IPv4 address"},
        BadUri{"nvme-tcp://[fe80::1%25eth0]/nqn.x?nsid=1", "is not an IPv4 address"},
        BadUri{"nvme-tcp://user@h/nqn.x?nsid=1", "host 'user@h' is not"},
        BadUri{"nvme-tcp://a,b=c/nqn.x?nsid=1", "host 'a,b=c' is not"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&path=h2:0", "path 'h2:0': bad port '0'"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&path=", "path '' has no host"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&path=h2,traddr=h3", "path 'h2,traddr=h3' is not"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&path=h%2C2", "path 'h,2' is not"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&offset=1.5G", "offset:"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&offset=1M&offset=2M", "offset is given twice"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&io_timeout=30s", "io_timeout '30s' is not a whole"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&io_timeout=1&io_timeout=1", "io_timeout is given twice"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&dhchap_secret_file=key", "'key' is not an absolute path"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&dhchap_secret_file=", "'' is not an absolute path"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&dhchap_secret_file=/k&dhchap_secret_file=/k",
               "dhchap_secret_file is given twice"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&dhchap_secret_file=/k%00", "%00"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&size=1G", "unknown query parameter 'size'"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&NSID=1", "unknown query parameter 'NSID'"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1&", "query parameter '' is not KEY=VALUE"},
        BadUri{"nvme-tcp://h/nqn.x?nsid", "query parameter 'nsid' is not KEY=VALUE"},
        BadUri{"nvme-tcp://h/nqn.x?nsid=1#frag", "no fragment"}));

TEST(ParseBackendUri, AnEncodedNulIsRefusedNamingTheUriAndTheEscape) {
  absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri("file:///var/lib/a.img%00.evil");
  ASSERT_FALSE(volume.ok()) << "accepted " << volume->file().path();
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(volume.status().message(),
              HasSubstr("backend URI 'file:///var/lib/a.img%00.evil': '/var/lib/a.img%00.evil' "
                        "contains %00"));
}

TEST(ParseBackendUri, NbdUrisAreKeptWholeForTheAgent) {
  for (const char* uri :
       {"nbd://127.0.0.1:10809/", "nbd://server/disk", "nbd+unix:///e?socket=/run/nbd.sock"}) {
    absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri(uri);
    ASSERT_TRUE(volume.ok()) << uri << ": " << volume.status();
    ASSERT_TRUE(volume->has_nbd()) << uri;
    EXPECT_EQ(volume->nbd().uri(), uri);
    EXPECT_EQ(FormatBackendUri(*volume), uri);
  }
}

TEST(FormatBackendUri, IsEmptyWithoutBackend) {
  EXPECT_EQ(FormatBackendUri(blk::v1::Volume()), "");
}

TEST(FormatBackendUri, EncodesWhatTheParserWouldMisread) {
  blk::v1::Volume volume;
  volume.mutable_file()->set_path("/srv/a b?c#d%e");
  EXPECT_EQ(FormatBackendUri(volume), "file:///srv/a%20b%3Fc%23d%25e");
}

class BackendUriRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendUriRoundTrip, FormatOfParseGivesTheUriBack) {
  absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri(GetParam());
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(FormatBackendUri(*volume), GetParam());
}

INSTANTIATE_TEST_SUITE_P(CanonicalUris, BackendUriRoundTrip,
                         ::testing::Values("null://", "file:///", "file:///dev/sdb",
                                           "file:///var/lib/blk/vol-1_a.img",
                                           "file:///srv/a%20b%3Fc%23d%25e~",
                                           "file:///%C3%A9t%C3%A9.img"));

TEST(BackendUriRoundTrip, ParseOfFormatGivesThePathBack) {
  blk::v1::Volume volume;
  volume.mutable_file()->set_path("/odd path/with\t?#%&=+;,\"'[]{}\x7f\xff/é");
  absl::StatusOr<blk::v1::Volume> parsed = ParseBackendUri(FormatBackendUri(volume));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->file().path(), volume.file().path());
}

TEST(ParseBackendUri, NvmeUriNamesTheCharDeviceAndAnOptionalOffset) {
  absl::StatusOr<blk::v1::Volume> plain = ParseBackendUri("nvme:///dev/ng0n1");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(plain->has_nvme());
  EXPECT_EQ(plain->nvme().path(), "/dev/ng0n1");
  EXPECT_EQ(plain->nvme().offset_bytes(), 0u);
  EXPECT_EQ(FormatBackendUri(*plain), "nvme:///dev/ng0n1");

  absl::StatusOr<blk::v1::Volume> offset = ParseBackendUri("nvme:///dev/ng1n2?offset=1G");
  ASSERT_TRUE(offset.ok()) << offset.status();
  EXPECT_EQ(offset->nvme().path(), "/dev/ng1n2");
  EXPECT_EQ(offset->nvme().offset_bytes(), uint64_t{1} << 30);
  EXPECT_EQ(FormatBackendUri(*offset), "nvme:///dev/ng1n2?offset=1073741824");
  absl::StatusOr<blk::v1::Volume> again = ParseBackendUri(FormatBackendUri(*offset));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->nvme().offset_bytes(), uint64_t{1} << 30);
}

TEST(ParseBackendUri, NvmeTcpUriSetsTheFabricWithTheAuthorityAsFirstPath) {
  absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri(
      "nvme-tcp://10.0.0.5:4421/nqn.2014-08.org.example:array1?nsid=3&path=10.0.1.5"
      "&path=[fd00::5]:4422&offset=1G&io_timeout=60&dhchap_secret_file=/etc/blk/a%20key");
  ASSERT_TRUE(volume.ok()) << volume.status();
  blk::v1::Volume expected;
  blk::v1::NvmeBackend& nvme = *expected.mutable_nvme();
  nvme.set_offset_bytes(uint64_t{1} << 30);
  blk::v1::NvmeFabric& fabric = *nvme.mutable_fabric();
  fabric.set_subsystem_nqn("nqn.2014-08.org.example:array1");
  fabric.set_nsid(3);
  fabric.add_paths("10.0.0.5:4421");
  fabric.add_paths("10.0.1.5:4420");
  fabric.add_paths("[fd00::5]:4422");
  fabric.set_io_timeout_seconds(60);
  fabric.set_dhchap_secret_file("/etc/blk/a key");
  EXPECT_EQ(volume->SerializeAsString(), expected.SerializeAsString()) << volume->DebugString();
}

TEST(ParseBackendUri, NvmeTcpPortDefaultsTo4420EverywhereAndTheNqnIsPercentDecoded) {
  absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri(
      "NVMe-TCP://[::1]/nqn.2014-08.org.example%3Aa%2Fb?nsid=1&path=array-b.example");
  ASSERT_TRUE(volume.ok()) << volume.status();
  const blk::v1::NvmeFabric& fabric = volume->nvme().fabric();
  EXPECT_EQ(fabric.subsystem_nqn(), "nqn.2014-08.org.example:a/b");
  EXPECT_THAT(fabric.paths(), ::testing::ElementsAre("[::1]:4420", "array-b.example:4420"));
  EXPECT_EQ(volume->nvme().path(), "");
  EXPECT_EQ(volume->nvme().offset_bytes(), 0u);
  EXPECT_EQ(FormatBackendUri(*volume),
            "nvme-tcp://[::1]:4420/nqn.2014-08.org.example:a/b?nsid=1&path=array-b.example:4420");
}

TEST(ParseBackendUri, NvmeTcpPathsMayBePercentEncoded) {
  absl::StatusOr<blk::v1::Volume> volume =
      ParseBackendUri("nvme-tcp://h/nqn.x?nsid=1&path=%5Bfd00%3A%3A6%5D%3A4430");
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_THAT(volume->nvme().fabric().paths(), ::testing::ElementsAre("h:4420", "[fd00::6]:4430"));
}

TEST(FormatBackendUri, NvmeTcpShowsWhatTheAgentFilledInOnlyThroughTheFabric) {
  // The multipath head the agent found and the controllers it connected are status, not URI.
  absl::StatusOr<blk::v1::Volume> volume = ParseBackendUri("nvme-tcp://h:4420/nqn.x?nsid=1");
  ASSERT_TRUE(volume.ok()) << volume.status();
  volume->mutable_nvme()->set_path("/dev/ng3n1");
  volume->mutable_nvme()->mutable_fabric()->add_agent_connected_paths("h:4420");
  EXPECT_EQ(FormatBackendUri(*volume), "nvme-tcp://h:4420/nqn.x?nsid=1");
}

TEST(FormatBackendUri, NvmeTcpEncodesWhatTheParserWouldMisread) {
  blk::v1::Volume volume;
  blk::v1::NvmeFabric& fabric = *volume.mutable_nvme()->mutable_fabric();
  fabric.set_subsystem_nqn("nqn.x:a?b&c#d e");
  fabric.set_nsid(2);
  fabric.add_paths("h:4420");
  fabric.set_dhchap_secret_file("/k/a&b=c?d");
  const std::string uri = FormatBackendUri(volume);
  EXPECT_EQ(uri,
            "nvme-tcp://h:4420/nqn.x:a%3Fb%26c%23d%20e?nsid=2&dhchap_secret_file=/k/a%26b%3Dc%3Fd");
  absl::StatusOr<blk::v1::Volume> parsed = ParseBackendUri(uri);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->SerializeAsString(), volume.SerializeAsString());
}

INSTANTIATE_TEST_SUITE_P(
    NvmeTcpUris, BackendUriRoundTrip,
    ::testing::Values(
        "nvme-tcp://10.0.0.5:4420/nqn.2014-08.org.example:array1?nsid=1",
        "nvme-tcp://10.0.0.5:4420/nqn.2014-08.org.example:array1?nsid=4294967294&path=10.0.1.5:"
        "4420&path=[fd00::5]:8009&path=array.example:1&offset=1048576&io_timeout=3600&dhchap_"
        "secret_file=/etc/blk/secret",
        "nvme-tcp://[::1]:4420/nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-"
        "00a0c91e6bf6?nsid=7"));

}  // namespace
}  // namespace blk::client
