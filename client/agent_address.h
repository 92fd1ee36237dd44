#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"

namespace blk::client {

// Where blkagent listens unless told otherwise (its --socket default, the systemd unit's).
inline constexpr char kDefaultSocket[] = "/run/blkagent/blkagent.sock";

// Where blkctl reaches the agent and with which credentials.
struct AgentAddress {
  std::string target;         // gRPC's: "unix:/path" or "host:port"
  std::string description;    // for messages: the socket's path, or "host:port (mutual TLS)"
  std::string how_to_choose;  // the flags that choose another address, for messages
  std::shared_ptr<grpc::ChannelCredentials> credentials;
};

// The agent's Unix socket at `path`.
AgentAddress UnixAgentAddress(const std::string& path);

// The agent's TCP listener at `host_port`, over mutual TLS: the agent's certificate must chain to
// `ca_file`, and blkctl presents `cert_file` with `key_file` (none when empty: the agent refuses
// that, but it shows the refusal). An unreadable or empty file is an error naming it.
absl::StatusOr<AgentAddress> TlsAgentAddress(const std::string& host_port,
                                             const std::string& ca_file,
                                             const std::string& cert_file,
                                             const std::string& key_file);

}  // namespace blk::client
