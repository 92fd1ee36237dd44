// Connecting to an NBD server and negotiating an export: blocking socket calls, so never called
// on a queue thread (at create time, and on a reconnect helper thread).
#pragma once

#include <chrono>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "server/nbd/protocol.h"
#include "server/nbd/uri.h"

namespace blk::server::nbd {

// A connection that nobody took over (a size probe, one opened for a volume that was then
// refused) ends with NBD_CMD_DISC when it goes.
struct Connection {
  Connection() = default;
  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&& other) noexcept;
  ~Connection();

  UniqueFd fd;  // a connected stream socket in transmission phase, blocking, no timeouts
  ExportInfo info;
};

// NBD_CMD_DISC on a socket in transmission phase, between two requests; best effort, without
// waiting (the server answers nothing).
void SendDisconnect(int fd);

// Fixed newstyle handshake: structured replies when offered, then NBD_OPT_GO asking for the block
// size constraints (NBD_OPT_EXPORT_NAME when the server does not know GO). Each socket call gives
// up after `timeout`. A negotiation that fails while the server still listens (an export it
// refuses, a server shutting down) ends with NBD_OPT_ABORT; one that fails after the server took
// the client into transmission (block sizes out of range), with NBD_CMD_DISC.
absl::StatusOr<Connection> Connect(const Address& address, std::chrono::milliseconds timeout);

}  // namespace blk::server::nbd
