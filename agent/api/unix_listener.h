#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "agent/api/caller_access.h"
#include "grpcpp/server.h"

namespace blk::agent {

// The agent's Unix socket, accepted by the agent itself rather than by gRPC: gRPC's own Unix
// listener does not tell a handler who connected. Each connection's kernel credentials are
// recorded in CallerAccess before the connection is handed to gRPC
// (grpc::AddInsecureChannelFromFd).
class UnixListener {
 public:
  // Binds `staging`, gives it `group` (none: root's) and `mode`, listens, and renames it to
  // `path`: no client ever finds the socket with other owners or permissions.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Listen(const std::string& staging,
                                                              const std::string& path,
                                                              std::optional<gid_t> group,
                                                              mode_t mode);
  ~UnixListener();  // Stop()
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  // Accepts connections on a thread of its own until Stop, and hands each to `server`.
  void Serve(grpc::Server& server, CallerAccess& access);
  // Stops accepting; connections already handed to gRPC stay gRPC's. Idempotent.
  void Stop();

 private:
  UnixListener(int listen_fd, int stop_fd) : listen_fd_(listen_fd), stop_fd_(stop_fd) {}
  void Accept(grpc::Server& server, CallerAccess& access);

  const int listen_fd_;
  const int stop_fd_;  // an eventfd: readable once Stop was called
  std::thread acceptor_;
};

// Reads the credentials the kernel recorded when the peer of `fd` connected.
absl::StatusOr<PeerCredentials> ReadPeerCredentials(int fd);

}  // namespace blk::agent
