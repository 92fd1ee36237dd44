#include "server/nbd/forwarding_backend.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "server/nbd/backend.h"
#include "server/tsan_annotations.h"

namespace blk::server::nbd {

ForwardingBackend::ForwardingBackend(std::shared_ptr<SharedConnection> shared, uint16_t queue)
    : shared_(std::move(shared)), queue_(queue), unsent_(shared_->depth) {}

absl::Status ForwardingBackend::Attach(Ring& ring, int /*first_file*/, Completer completer) {
  owner_ring_fd_ = shared_->ring_fds[0].load(std::memory_order_acquire);
  if (owner_ring_fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("NBD queue ", queue_, " shares queue 0's connection, which is not running"));
  }
  ring_ = &ring;
  completer_ = completer;
  shared_->rings[queue_].store(&ring, std::memory_order_relaxed);
  shared_->ring_fds[queue_].store(ring.get()->ring_fd, std::memory_order_release);
  return absl::OkStatus();
}

void ForwardingBackend::Submit(uint16_t tag, const BlockIo& io) {
  if (tag >= shared_->depth) return completer_.Complete(tag, -EINVAL);
  const uint32_t slot = shared_->Slot(queue_, tag);
  shared_->requests[slot] = io;
  HappensBefore(&shared_->requests[slot]);
  if (!Forward(tag)) unsent_.Add(tag);
}

bool ForwardingBackend::Forward(uint16_t tag) {
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) return false;
  const uint32_t slot = shared_->Slot(queue_, tag);
  io_uring_prep_msg_ring(sqe, owner_ring_fd_, 0, nbd::Backend::ForwardedRequestUserData(slot), 0);
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  sqe->user_data = EncodeUserData(CqeKind::kBackend, tag);
  return true;
}

void ForwardingBackend::OnCompletion(uint16_t tag, const io_uring_cqe& cqe) {
  if (cqe.res >= 0 || tag >= shared_->depth) return;
  if (cqe.res == -EOVERFLOW || cqe.res == -EAGAIN || cqe.res == -ENOMEM) {
    if (!Forward(tag)) unsent_.Add(tag);
    return;
  }
  completer_.Complete(tag, -EIO);
}

void ForwardingBackend::EndOfTurn() {
  unsent_.RetryEach([this](uint32_t tag) { return Forward(static_cast<uint16_t>(tag)); });
}

}  // namespace blk::server::nbd
