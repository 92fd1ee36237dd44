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
        BadUri{"iscsi://h/e", "(supported: null, file, nbd, nbd+unix, nvme)"},
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

}  // namespace
}  // namespace blk::client
