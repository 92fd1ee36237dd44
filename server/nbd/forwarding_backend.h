// The backend of a queue other than 0 on an NBD volume whose queues share one connection (see
// shared_connection.h): it forwards each request to queue 0's ring and hands the result that
// comes back on its own ring to its queue.
#pragma once

#include <memory>

#include "server/backend.h"
#include "server/nbd/shared_connection.h"

namespace blk::server::nbd {

class ForwardingBackend final : public server::Backend {
 public:
  ForwardingBackend(std::shared_ptr<SharedConnection> shared, uint16_t queue);

  absl::Status Attach(Ring& ring, int first_file) override;
  int32_t Submit(uint16_t tag, const BlockIo& io) override;
  int32_t OnCompletion(uint16_t tag, const io_uring_cqe& cqe) override;

 private:
  std::shared_ptr<SharedConnection> shared_;
  const uint16_t queue_;
  Ring* ring_ = nullptr;
  int owner_ring_fd_ = -1;
};

}  // namespace blk::server::nbd
