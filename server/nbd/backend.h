// The NBD client as a queue's server::Backend: on the queue's own io_uring, for that queue, or for
// all the queues of the volume when they share its connection (shared_connection.h). Two parts,
// each readable alone, with dependencies one way: the Requests (requests.h) turn block I/O into
// NBD requests and their replies into completions, io_timeout included; the Transport
// (transport.h) sends and receives them on the connection and re-establishes it when it breaks.
// This class only wires them to the queue: it hands each I/O to the Requests and each CQE of its
// own operations (events.h) to the part that armed it.
//
// Only io_timeout, or an error the server reports for the request itself, reaches the caller: a
// connection that breaks is re-established while the requests wait, and they are resent.
#pragma once

#include <memory>
#include <optional>

#include "server/backend.h"
#include "server/nbd/durability.h"
#include "server/nbd/handshake.h"
#include "server/nbd/reconnector.h"
#include "server/nbd/requests.h"
#include "server/nbd/shared_connection.h"
#include "server/nbd/stats.h"
#include "server/nbd/transport.h"

namespace blk::server::nbd {

struct BackendOptions : TransportOptions {
  uint16_t queue_depth = 128;
  // Set when the volume's queues share this backend's connection (it is queue 0's).
  std::shared_ptr<SharedConnection> shared;
  // The volume's (required), in which this backend's connection is number `connection`.
  std::shared_ptr<Durability> durability;
  uint16_t connection = 0;
};

class Backend final : public server::Backend {
 public:
  // Without a `connection` (its server is down) it starts reconnecting; I/O waits for it, or
  // fails at io_timeout.
  Backend(std::optional<Connection> connection, const BackendOptions& options,
          std::unique_ptr<Reconnector> reconnector, std::shared_ptr<Stats> stats);

  absl::Status Attach(Ring& ring, int first_file, Completer completer) override;
  void Submit(uint16_t tag, const BlockIo& io) override;
  void OnCompletion(uint16_t tag, const io_uring_cqe& cqe) override;
  void EndOfTurn() override;

  // The message a forwarding queue posts to this backend's ring for its request in `slot`.
  static uint64_t ForwardedRequestUserData(uint32_t slot);

 private:
  Requests requests_;  // before transport_, which uses it until it goes
  Transport transport_;
};

}  // namespace blk::server::nbd
