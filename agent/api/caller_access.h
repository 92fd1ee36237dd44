#pragma once

#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/api/access_policy.h"
#include "agent/api/tls_client_names.h"
#include "grpcpp/server_context.h"

namespace blk::agent {

// What an RPC does: only reads (Get, List, Stats, NodeInfo), or changes volumes.
enum class Access { kRead, kWrite };

// Who made a call and what they may do.
struct Caller {
  std::string who;  // for messages and the log: "uid 1000 (pid 42)", "TLS client DNS:ops at ..."
  Role role = Role::kNone;
  bool tls = false;  // its role comes from its certificate's names, not its groups
};

// OK when `caller` may call `method`; PERMISSION_DENIED naming the caller and the method when not.
absl::Status Permit(const Caller& caller, absl::string_view method, Access access);

// Knows the caller of every call. Unix socket connections are accepted by the agent
// (UnixListener), which records each one's kernel credentials by its fd before handing the fd to
// gRPC, whose peer string for it is "fd:N". The fd stays open while a call on it is alive, so the
// entry read for a call is its own connection's even though fd numbers are reused. TCP
// connections are all mutual TLS: `tls` decides a verified client's role by its certificate's
// names.
class CallerAccess {
 public:
  explicit CallerAccess(AccessPolicy policy, TlsClientPolicy tls = {})
      : policy_(policy), tls_(std::move(tls)) {}

  // The connection on `fd` comes from `peer`; replaces what a closed connection left there.
  void Remember(int fd, const PeerCredentials& peer);

  // Permit() for the caller of `context`; a refusal is logged.
  absl::Status Check(const grpc::ServerContextBase& context, absl::string_view method,
                     Access access) const;

 private:
  Caller Identify(const grpc::ServerContextBase& context) const;

  const AccessPolicy policy_;
  const TlsClientPolicy tls_;
  mutable absl::Mutex mutex_;
  std::unordered_map<int, Caller> by_fd_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace blk::agent
