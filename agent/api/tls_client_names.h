// Who a mutual-TLS client is, by the names its certificate carries, and what those names may do.
#pragma once

#include <string>
#include <vector>

#include "agent/api/access_policy.h"
#include "grpcpp/security/auth_context.h"

namespace blk::agent {

// The names a verified client certificate is known by. Following RFC 6125 (6.4.4), a
// certificate with a subjectAltName is known only by its DNS names there (a common name beside
// them is ignored: CAs put display text there); only a certificate without any subjectAltName is
// known by its subject's common name. URI, IP and email SANs name nothing here.
struct CertificateNames {
  std::vector<std::string> names;
  bool from_common_name = false;  // no subjectAltName: `names` holds the CN
};

// The names of the peer of a TLS call (gRPC's "peer_dns", "x509_subject_alternative_name" and
// "x509_common_name" properties).
CertificateNames NamesOf(const grpc::AuthContext& auth);

// "DNS:a.example, DNS:b.example", "CN=ops", or "(no name)": for messages and the log.
std::string Describe(const CertificateNames& names);

// Decides a verified TLS client's role from --tls-admin-names and --tls-reader-names: a name on
// the admin list makes it admin, else one on the reader list reader, else it has no role. Names
// compare without regard to case (DNS names do not) and exactly: no wildcards. With
// --tls-any-client-admin every verified client is admin (the agent's behaviour before the lists).
class TlsClientPolicy {
 public:
  TlsClientPolicy() = default;  // nobody
  TlsClientPolicy(std::vector<std::string> admin_names, std::vector<std::string> reader_names,
                  bool any_client_admin)
      : admin_names_(std::move(admin_names)),
        reader_names_(std::move(reader_names)),
        any_client_admin_(any_client_admin) {}

  Role RoleOf(const CertificateNames& names) const;

 private:
  std::vector<std::string> admin_names_;
  std::vector<std::string> reader_names_;
  bool any_client_admin_ = false;
};

}  // namespace blk::agent
