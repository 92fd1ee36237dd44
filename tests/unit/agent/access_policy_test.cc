#include "agent/api/access_policy.h"

#include "agent/api/caller_access.h"
#include "agent/api/tls_client_names.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::agent {
namespace {

using ::testing::HasSubstr;

constexpr gid_t kAdmins = 2000;
constexpr gid_t kReaders = 2001;
constexpr gid_t kOthers = 2002;

PeerCredentials User(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  return PeerCredentials{.uid = uid, .gid = gid, .pid = 42, .groups = std::move(groups)};
}

TEST(AccessPolicy, RootIsAdminWithoutAnyGroup) {
  const AccessPolicy policy(std::nullopt, std::nullopt);
  EXPECT_EQ(policy.RoleOf(User(0, 0)), Role::kAdmin);
  EXPECT_EQ(policy.RoleOf(User(1000, 0)), Role::kNone);  // group root is not root
  EXPECT_EQ(policy.RoleOf(User(1000, 1000, {0})), Role::kNone);
}

TEST(AccessPolicy, PrimaryOrSupplementaryGroupDecides) {
  const AccessPolicy policy(kAdmins, kReaders);
  EXPECT_EQ(policy.RoleOf(User(1000, kAdmins)), Role::kAdmin);
  EXPECT_EQ(policy.RoleOf(User(1000, kOthers, {kOthers, kAdmins})), Role::kAdmin);
  EXPECT_EQ(policy.RoleOf(User(1000, kReaders)), Role::kReader);
  EXPECT_EQ(policy.RoleOf(User(1000, kOthers, {kReaders})), Role::kReader);
  EXPECT_EQ(policy.RoleOf(User(1000, kOthers, {kOthers})), Role::kNone);
}

TEST(AccessPolicy, AdminWinsOverReader) {
  const AccessPolicy policy(kAdmins, kReaders);
  EXPECT_EQ(policy.RoleOf(User(1000, kReaders, {kAdmins})), Role::kAdmin);
}

TEST(AccessPolicy, ReaderGroupAloneGivesNoAdmins) {
  const AccessPolicy policy(std::nullopt, kReaders);
  EXPECT_EQ(policy.RoleOf(User(1000, kReaders)), Role::kReader);
  EXPECT_EQ(policy.RoleOf(User(1000, kAdmins)), Role::kNone);
}

TEST(ResolveGroup, TakesNumbersAndNames) {
  EXPECT_EQ(ResolveGroup("4242", "--admin-group").value(), 4242u);
  EXPECT_EQ(ResolveGroup("root", "--admin-group").value(), 0u);
}

TEST(ResolveGroup, UnknownNameIsNamedWithTheFlag) {
  absl::StatusOr<gid_t> group = ResolveGroup("no-such-group-blk", "--reader-group");
  EXPECT_EQ(group.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(group.status().message(), HasSubstr("--reader-group"));
  EXPECT_THAT(group.status().message(), HasSubstr("no-such-group-blk"));
  EXPECT_FALSE(ResolveGroup("", "--admin-group").ok());
  EXPECT_FALSE(ResolveGroup("12x", "--admin-group").ok());
}

TEST(Permit, AdminMayCallEverything) {
  const Caller admin{.who = "uid 1000 (pid 42)", .role = Role::kAdmin};
  EXPECT_TRUE(Permit(admin, "CreateVolume", Access::kWrite).ok());
  EXPECT_TRUE(Permit(admin, "ListVolumes", Access::kRead).ok());
}

TEST(Permit, ReaderMayOnlyRead) {
  const Caller reader{.who = "uid 1001 (pid 43)", .role = Role::kReader};
  EXPECT_TRUE(Permit(reader, "GetVolume", Access::kRead).ok());
  absl::Status refused = Permit(reader, "DeleteVolume", Access::kWrite);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.message(), HasSubstr("uid 1001"));
  EXPECT_THAT(refused.message(), HasSubstr("DeleteVolume"));
}

TEST(Permit, StrangerMayCallNothing) {
  const Caller stranger{.who = "uid 1002 (pid 44)", .role = Role::kNone};
  absl::Status refused = Permit(stranger, "ListVolumes", Access::kRead);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.message(), HasSubstr("uid 1002"));
  EXPECT_THAT(refused.message(), HasSubstr("ListVolumes"));
}

}  // namespace
}  // namespace blk::agent

namespace blk::agent {
namespace {

using ::testing::HasSubstr;

CertificateNames Dns(std::vector<std::string> names) {
  return CertificateNames{.names = std::move(names), .from_common_name = false};
}

TEST(TlsClientPolicy, ANameOnTheAdminListIsAdminOnTheReaderListReaderElseNothing) {
  const TlsClientPolicy policy({"ops.example"}, {"grafana.example"}, false);
  EXPECT_EQ(policy.RoleOf(Dns({"x.example", "OPS.example"})), Role::kAdmin);
  EXPECT_EQ(policy.RoleOf(Dns({"grafana.example"})), Role::kReader);
  EXPECT_EQ(policy.RoleOf(Dns({"ops.example.evil"})), Role::kNone);
  EXPECT_EQ(policy.RoleOf(Dns({})), Role::kNone);
  EXPECT_EQ(TlsClientPolicy().RoleOf(Dns({"ops.example"})), Role::kNone);
}

TEST(TlsClientPolicy, AnyClientAdminAdmitsEveryVerifiedClient) {
  EXPECT_EQ(TlsClientPolicy({}, {}, true).RoleOf(Dns({})), Role::kAdmin);
}

TEST(TlsClientPolicy, DescribeNamesTheSubjectSeen) {
  EXPECT_EQ(Describe(Dns({"a.example", "b.example"})), "DNS:a.example, DNS:b.example");
  EXPECT_EQ(Describe(CertificateNames{.names = {"ops"}, .from_common_name = true}), "CN=ops");
}

TEST(TlsClientPolicy, RefusalsNameTheListsNotTheGroups) {
  const absl::Status reader =
      Permit(Caller{.who = "TLS client DNS:g", .role = Role::kReader, .tls = true}, "DeleteVolume",
             Access::kWrite);
  EXPECT_THAT(reader.message(), HasSubstr("on --tls-reader-names"));
  const absl::Status none =
      Permit(Caller{.who = "TLS client CN=x", .role = Role::kNone, .tls = true}, "ListVolumes",
             Access::kRead);
  EXPECT_EQ(none.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(none.message(), HasSubstr("TLS client CN=x may not call ListVolumes"));
}

}  // namespace
}  // namespace blk::agent
