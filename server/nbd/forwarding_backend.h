// The backend of a queue other than 0 on an NBD volume whose queues share one connection (see
// shared_connection.h): it forwards each request to queue 0's ring; the result comes back on its
// own ring as a CqeKind::kResult message, which its queue completes without asking this backend.
#pragma once

#include <memory>

#include "server/backend.h"
#include "server/nbd/shared_connection.h"
#include "server/ublk/sqe_waitlist.h"

namespace blk::server::nbd {

class ForwardingBackend final : public server::Backend {
 public:
  ForwardingBackend(std::shared_ptr<SharedConnection> shared, uint16_t queue);

  absl::Status Attach(Ring& ring, int first_file, Completer completer) override;
  void Submit(uint16_t tag, const BlockIo& io) override;
  // Only a MSG_RING that failed (successful ones post no CQE here): queue 0 never saw the request.
  // A transient failure (queue 0's CQ full, no memory) sends it again; any other fails it.
  void OnCompletion(uint16_t tag, const io_uring_cqe& cqe) override;
  // Forwards what waited for an SQE.
  void EndOfTurn() override;

 private:
  // The MSG_RING for the tag's request; false when no SQE was free.
  bool Forward(uint16_t tag);

  std::shared_ptr<SharedConnection> shared_;
  const uint16_t queue_;
  Ring* ring_ = nullptr;
  Completer completer_;
  int owner_ring_fd_ = -1;
  SqeWaitlist unsent_;
};

}  // namespace blk::server::nbd
