#include "agent/api/mutual_tls.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace blk::agent {

absl::StatusOr<std::string> ReadPemFile(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(),
                        absl::StrCat("cannot read ", contents.status().message()));
  }
  if (contents->empty()) return absl::InvalidArgumentError(absl::StrCat(path, " is empty"));
  return contents;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MutualTlsServerCredentials(
    const std::string& cert_file, const std::string& key_file, const std::string& client_ca_file) {
  // Read once here only to refuse a start with a missing or empty file; the provider reads them.
  for (const std::string* file : {&cert_file, &key_file, &client_ca_file}) {
    if (absl::StatusOr<std::string> pem = ReadPemFile(*file); !pem.ok()) return pem.status();
  }
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      key_file, cert_file, client_ca_file, kCertificateRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  options.watch_root_certs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace blk::agent
