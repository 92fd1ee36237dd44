#include "server/nbd/uri.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace blk::server {
namespace {

TEST(NbdUriTest, TcpWithPortAndExport) {
  absl::StatusOr<nbd::Address> a = nbd::ParseUri("nbd://10.0.0.5:10900/disk%201");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "10.0.0.5");
  EXPECT_EQ(a->port, 10900);
  EXPECT_EQ(a->export_name, "disk 1");
  EXPECT_FALSE(a->is_unix());
}

TEST(NbdUriTest, TcpDefaultsToPort10809AndEmptyExport) {
  absl::StatusOr<nbd::Address> a = nbd::ParseUri("nbd://127.0.0.1/");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->port, 10809);
  EXPECT_EQ(a->export_name, "");
  a = nbd::ParseUri("nbd://server");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "server");
}

TEST(NbdUriTest, BracketedIpv6Host) {
  absl::StatusOr<nbd::Address> a = nbd::ParseUri("nbd://[::1]:1234/x");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 1234);
  EXPECT_EQ(a->ToString(), "nbd://[::1]:1234/x");
}

TEST(NbdUriTest, UnixSocket) {
  absl::StatusOr<nbd::Address> a = nbd::ParseUri("nbd+unix:///vol?socket=/run/nbd.sock");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->is_unix());
  EXPECT_EQ(a->unix_socket, "/run/nbd.sock");
  EXPECT_EQ(a->export_name, "vol");
  a = nbd::ParseUri("nbd+unix:///?socket=/tmp/s");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->export_name, "");
}

TEST(NbdUriTest, MalformedUrisAreRefusedWithTheReason) {
  for (const char* uri :
       {"", "nbd:/x", "http://h/x", "nbd:///x", "nbd://h:0/", "nbd://h:65536/", "nbd://h:x/",
        "nbd://[::1/", "nbd://h/x?y=1", "nbd://h/%zz", "nbd://h/%4", "nbd+unix://host/x?socket=/s",
        "nbd+unix:///x", "nbd+unix:///x?socket=rel", "nbd+unix:///x?socket=/s&tls=on"}) {
    absl::StatusOr<nbd::Address> a = nbd::ParseUri(uri);
    EXPECT_FALSE(a.ok()) << uri;
    if (!a.ok()) {
      EXPECT_NE(a.status().message().find("NBD URI"), absl::string_view::npos);
    }
  }
}

TEST(NbdUriTest, AnEncodedNulIsRefusedNamingTheUri) {
  // Decoded, the socket path would be cut short at the NUL: "/run/nbd.sock" instead of the
  // path written.
  for (const char* uri : {"nbd+unix:///e?socket=/run/nbd.sock%00.evil",
                          "nbd+unix:///e%00?socket=/s", "nbd://h/e%00x"}) {
    absl::StatusOr<nbd::Address> a = nbd::ParseUri(uri);
    ASSERT_FALSE(a.ok()) << "accepted " << uri;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find(absl::StrCat("NBD URI \"", uri, "\"")),
              absl::string_view::npos)
        << a.status();
    EXPECT_NE(a.status().message().find("%00"), absl::string_view::npos) << a.status();
  }
}

}  // namespace
}  // namespace blk::server
