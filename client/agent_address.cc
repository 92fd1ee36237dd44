#include "client/agent_address.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"

namespace blk::client {

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(),
                        absl::StrCat(flag, ": cannot read ", contents.status().message()));
  }
  if (contents->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is empty"));
  }
  return contents;
}

}  // namespace

AgentAddress UnixAgentAddress(const std::string& path) {
  return AgentAddress{.target = absl::StrCat("unix:", path),
                      .description = path,
                      .how_to_choose = "--socket or BLKCTL_SOCKET choose another socket",
                      .credentials = grpc::InsecureChannelCredentials()};
}

absl::StatusOr<AgentAddress> TlsAgentAddress(const std::string& host_port,
                                             const std::string& ca_file,
                                             const std::string& cert_file,
                                             const std::string& key_file) {
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> ca = ReadPem("--tls-ca", ca_file);
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = std::move(*ca);
  if (!cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem("--tls-cert", cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("--tls-key", key_file);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = std::move(*cert);
    options.pem_private_key = std::move(*key);
  }
  return AgentAddress{.target = host_port,
                      .description = absl::StrCat(host_port, " (mutual TLS)"),
                      .how_to_choose = "--tcp chooses another address",
                      .credentials = grpc::SslCredentials(options)};
}

}  // namespace blk::client
