// Connecting to an NBD server and negotiating an export: blocking socket calls, so never called
// on a queue thread (at create time, and on a reconnect helper thread).
#pragma once

#include <chrono>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "server/nbd/protocol.h"
#include "server/nbd/uri.h"

namespace blk::server::nbd {

struct Connection {
  UniqueFd fd;  // a connected stream socket in transmission phase, blocking, no timeouts
  ExportInfo info;
};

// Fixed newstyle handshake: structured replies when offered, then NBD_OPT_GO asking for the block
// size constraints (NBD_OPT_EXPORT_NAME when the server does not know GO). Each socket call gives
// up after `timeout`.
absl::StatusOr<Connection> Connect(const Address& address, std::chrono::milliseconds timeout);

}  // namespace blk::server::nbd
