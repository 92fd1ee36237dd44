#include "agent/api/mutual_tls.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"

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
  absl::StatusOr<std::string> cert = ReadPemFile(cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile(key_file);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> client_ca = ReadPemFile(client_ca_file);
  if (!client_ca.ok()) return client_ca.status();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = std::move(*client_ca);
  options.pem_key_cert_pairs.push_back(
      {.private_key = std::move(*key), .cert_chain = std::move(*cert)});
  return grpc::SslServerCredentials(options);
}

}  // namespace blk::agent
