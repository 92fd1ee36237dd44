// Connecting to an NBD server and negotiating an export: blocking socket calls, so never called
// on a queue thread (at create time, and on a reconnect helper thread).
#pragma once

#include <chrono>

#include "absl/status/statusor.h"
#include "server/nbd_protocol.h"
#include "server/nbd_uri.h"
#include "server/unique_fd.h"

namespace blk::server {

struct NbdConnection {
  UniqueFd fd;  // a connected stream socket in transmission phase, blocking, no timeouts
  nbd::ExportInfo info;
};

// Fixed newstyle handshake: structured replies when offered, then NBD_OPT_GO asking for the block
// size constraints (NBD_OPT_EXPORT_NAME when the server does not know GO). Each socket call gives
// up after `timeout`.
absl::StatusOr<NbdConnection> ConnectNbd(const NbdAddress& address,
                                         std::chrono::milliseconds timeout);

}  // namespace blk::server
