#include "agent/api/tls_client_names.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpc/grpc_security_constants.h"

namespace blk::agent {

namespace {

std::vector<std::string> Values(const grpc::AuthContext& auth, const char* property) {
  std::vector<std::string> values;
  for (const grpc::string_ref& value : auth.FindPropertyValues(property)) {
    values.emplace_back(value.data(), value.size());
  }
  return values;
}

bool AnyOn(const std::vector<std::string>& names, const std::vector<std::string>& list) {
  return std::any_of(names.begin(), names.end(), [&](const std::string& name) {
    return std::any_of(list.begin(), list.end(), [&](const std::string& allowed) {
      return absl::EqualsIgnoreCase(name, allowed);
    });
  });
}

}  // namespace

CertificateNames NamesOf(const grpc::AuthContext& auth) {
  if (!Values(auth, GRPC_X509_SAN_PROPERTY_NAME).empty()) {
    return CertificateNames{.names = Values(auth, GRPC_PEER_DNS_PROPERTY_NAME),
                            .from_common_name = false};
  }
  return CertificateNames{.names = Values(auth, GRPC_X509_CN_PROPERTY_NAME),
                          .from_common_name = true};
}

std::string Describe(const CertificateNames& names) {
  if (names.names.empty()) {
    return names.from_common_name ? "(no subjectAltName, no common name)"
                                  : "(no DNS subjectAltName)";
  }
  const char* prefix = names.from_common_name ? "CN=" : "DNS:";
  return absl::StrJoin(names.names, ", ", [prefix](std::string* out, const std::string& name) {
    absl::StrAppend(out, prefix, name);
  });
}

Role TlsClientPolicy::RoleOf(const CertificateNames& names) const {
  if (any_client_admin_ || AnyOn(names.names, admin_names_)) return Role::kAdmin;
  if (AnyOn(names.names, reader_names_)) return Role::kReader;
  return Role::kNone;
}

}  // namespace blk::agent
