#include "server/qos/throttling_backend.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "common/monotonic_clock.h"
#include "server/ublk/abi.h"

namespace blk::server {
namespace {

bool IsWrite(uint8_t op) {
  return op == abi::kIoOpWrite || op == abi::kIoOpWriteZeroes || op == abi::kIoOpDiscard;
}

// Flushes are never limited.
bool Limited(const Limiter& limiter, const BlockIo& io) {
  return io.op != abi::kIoOpFlush && !limiter.unlimited();
}

}  // namespace

ThrottlingBackend::ThrottlingBackend(std::unique_ptr<Backend> inner,
                                     std::shared_ptr<Limiter> limiter, uint16_t queue_depth)
    : inner_(std::move(inner)), limiter_(std::move(limiter)), waiting_(queue_depth) {}

absl::Status ThrottlingBackend::Attach(Ring& ring, int first_file, Completer completer) {
  ring_ = &ring;
  completer_ = completer;
  return inner_->Attach(ring, first_file, completer);
}

bool ThrottlingBackend::Ready(Waiting& entry, int64_t now_ns) {
  if (!Limited(*limiter_, entry.io)) return true;
  if (!entry.reserved) {
    const BlockIo& io = entry.io;
    const uint32_t data = io.op == abi::kIoOpRead || io.op == abi::kIoOpWrite ? io.length : 0;
    entry.generation = limiter_->generation();
    entry.go_at_ns = limiter_->Reserve(IsWrite(io.op), data, now_ns);
    entry.reserved = true;
  } else if (entry.generation != limiter_->generation()) {
    return true;
  }
  if (entry.go_at_ns <= now_ns) return true;
  next_wait_ns_ = entry.go_at_ns - now_ns;
  return false;
}

void ThrottlingBackend::Submit(uint16_t tag, const BlockIo& io) {
  // Behind waiting requests a new one waits too: they are served in order.
  if (count_ == 0) {
    if (!Limited(*limiter_, io)) return inner_->Submit(tag, io);
    Waiting entry{tag, io, MonotonicNs()};
    if (Ready(entry, entry.since_ns)) return inner_->Submit(tag, io);
    if (limiter_->failing_held()) return completer_.Complete(tag, -EIO);
    waiting_[head_] = entry;
  } else {
    waiting_[(head_ + count_) % waiting_.size()] = Waiting{tag, io, MonotonicNs()};
  }
  ++count_;  // at most queue_depth: a tag waits at most once
}

void ThrottlingBackend::AdmitWaiting(int64_t now_ns) {
  if (limiter_->failing_held()) return EndEveryWaiting(completer_, -EIO);  // Limiter::FailHeld
  while (count_ > 0) {
    Waiting& entry = waiting_[head_];
    if (!Ready(entry, now_ns)) return;
    limiter_->RecordWait(now_ns - entry.since_ns);
    head_ = (head_ + 1) % waiting_.size();
    --count_;
    inner_->Submit(entry.tag, entry.io);
  }
}

void ThrottlingBackend::OnCompletion(uint16_t tag, const io_uring_cqe& cqe) {
  if (KindOf(cqe.user_data) != CqeKind::kThrottle) return inner_->OnCompletion(tag, cqe);
  timer_armed_ = false;
  AdmitWaiting(MonotonicNs());
}

void ThrottlingBackend::ArmTimer() {
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) return;  // the next turn arms it
  const int64_t wait = std::clamp<int64_t>(next_wait_ns_, 1000, kMaxWaitMs * 1000000);
  timeout_.tv_sec = wait / 1000000000;
  timeout_.tv_nsec = wait % 1000000000;
  io_uring_prep_timeout(sqe, &timeout_, 0, 0);
  sqe->user_data = EncodeUserData(CqeKind::kThrottle, 0);
  timer_armed_ = true;
}

void ThrottlingBackend::EndEveryWaiting(Completer to, int32_t result) {
  while (count_ > 0) {
    const uint16_t tag = waiting_[head_].tag;
    head_ = (head_ + 1) % waiting_.size();
    --count_;
    to.Complete(tag, result);
  }
}

void ThrottlingBackend::ReleaseUnstarted(Completer released) {
  EndEveryWaiting(released, 0);
  inner_->ReleaseUnstarted(released);
}

void ThrottlingBackend::EndOfTurn() {
  if (count_ > 0 && !timer_armed_) ArmTimer();
  inner_->EndOfTurn();
}

}  // namespace blk::server
