#include "agent/api/caller_access.h"

#include <charconv>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/auth_context.h"
#include "spdlog/spdlog.h"

namespace blk::agent {

namespace {

constexpr absl::string_view kFdPeerPrefix = "fd:";

// The fd of a connection UnixListener handed to gRPC, from its peer string "fd:N".
std::optional<int> PeerFd(absl::string_view peer) {
  if (!absl::StartsWith(peer, kFdPeerPrefix)) return std::nullopt;
  peer.remove_prefix(kFdPeerPrefix.size());
  int fd = -1;
  const auto [end, error] = std::from_chars(peer.data(), peer.data() + peer.size(), fd);
  if (error != std::errc() || end != peer.data() + peer.size()) return std::nullopt;
  return fd;
}

}  // namespace

absl::Status Permit(const Caller& caller, absl::string_view method, Access access) {
  switch (caller.role) {
    case Role::kAdmin:
      return absl::OkStatus();
    case Role::kReader:
      if (access == Access::kRead) return absl::OkStatus();
      return absl::PermissionDeniedError(
          absl::StrCat(caller.who, " may not call ", method, ": it is ",
                       caller.tls ? "on --tls-reader-names" : "in the reader group",
                       ", which may only call read-only RPCs"));
    case Role::kNone:
      break;
  }
  if (caller.tls) {
    return absl::PermissionDeniedError(
        absl::StrCat(caller.who, " may not call ", method,
                     ": its certificate names no one on --tls-admin-names or --tls-reader-names"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat(caller.who, " may not call ", method,
                   ": it is neither root nor in the agent's admin or "
                   "reader group"));
}

void CallerAccess::Remember(int fd, const PeerCredentials& peer) {
  Caller caller{.who = absl::StrCat("uid ", peer.uid, " (pid ", peer.pid, ")"),
                .role = policy_.RoleOf(peer)};
  absl::MutexLock lock(&mutex_);
  by_fd_[fd] = std::move(caller);
}

Caller CallerAccess::Identify(const grpc::ServerContextBase& context) const {
  const std::string peer = context.peer();
  if (std::optional<int> fd = PeerFd(peer)) {
    absl::MutexLock lock(&mutex_);
    auto found = by_fd_.find(*fd);
    if (found != by_fd_.end()) return found->second;
    return Caller{.who = absl::StrCat("unknown connection ", peer), .role = Role::kNone};
  }
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth && auth->IsPeerAuthenticated()) {
    const CertificateNames names = NamesOf(*auth);
    return Caller{.who = absl::StrCat("TLS client ", Describe(names), " at ", peer),
                  .role = tls_.RoleOf(names),
                  .tls = true};
  }
  return Caller{.who = absl::StrCat("unauthenticated peer ", peer), .role = Role::kNone};
}

absl::Status CallerAccess::Check(const grpc::ServerContextBase& context, absl::string_view method,
                                 Access access) const {
  absl::Status permitted = Permit(Identify(context), method, access);
  if (!permitted.ok()) spdlog::warn("refused: {}", std::string(permitted.message()));
  return permitted;
}

}  // namespace blk::agent
