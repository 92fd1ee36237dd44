#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace blk::agent {

// How often the TCP listener re-reads its certificate, key and client CA files.
inline constexpr unsigned kCertificateRefreshSeconds = 2;

// Server credentials for the TCP listener: TLS with `cert_file` and `key_file`, and every client
// must present a certificate that `client_ca_file` verifies (no certificate, or one from another
// CA, fails the handshake). An unreadable or empty file at start is an error naming it. The files
// are re-read every kCertificateRefreshSeconds (gRPC's FileWatcherCertificateProvider): a new
// connection gets what they hold then, with no restart and no signal; connections already up
// keep theirs. Replace a certificate and its key together (write both beside, then rename each
// into place), so that a re-read finds a matching pair. SIGHUP is not needed (and is ignored).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MutualTlsServerCredentials(
    const std::string& cert_file, const std::string& key_file, const std::string& client_ca_file);

// The whole of a PEM file; an error naming the file when it cannot be read or is empty.
absl::StatusOr<std::string> ReadPemFile(const std::string& path);

}  // namespace blk::agent
