#include "server/qos/throttling_backend.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "server/ublk/abi.h"

namespace blk::server {
namespace {

int64_t MonotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

bool IsWrite(uint8_t op) {
  return op == abi::kIoOpWrite || op == abi::kIoOpWriteZeroes || op == abi::kIoOpDiscard;
}

}  // namespace

ThrottlingBackend::ThrottlingBackend(std::unique_ptr<Backend> inner,
                                     std::shared_ptr<Limiter> limiter, uint16_t queue_depth)
    : inner_(std::move(inner)), limiter_(std::move(limiter)), waiting_(queue_depth) {}

absl::Status ThrottlingBackend::Attach(Ring& ring, int first_file, Completer completer) {
  ring_ = &ring;
  return inner_->Attach(ring, first_file, completer);
}

void ThrottlingBackend::Submit(uint16_t tag, const BlockIo& io) {
  // Behind waiting requests a new one waits too: they are served in order.
  if (count_ == 0) {
    if (io.op == abi::kIoOpFlush || limiter_->unlimited()) return inner_->Submit(tag, io);
  }
  const int64_t now = MonotonicNs();
  Waiting entry{tag, io, 0, now};
  if (count_ == 0) {
    const uint32_t data = io.op == abi::kIoOpRead || io.op == abi::kIoOpWrite ? io.length : 0;
    const int64_t wait = limiter_->TryAdmit(IsWrite(io.op), data, now, entry.paid);
    if (wait == 0) return inner_->Submit(tag, io);
    next_wait_ns_ = wait;
  }
  if (count_ == waiting_.size()) return inner_->Submit(tag, io);  // cannot happen: a tag at once
  waiting_[(head_ + count_) % waiting_.size()] = entry;
  ++count_;
}

void ThrottlingBackend::AdmitWaiting(int64_t now_ns) {
  while (count_ > 0) {
    Waiting& entry = waiting_[head_];
    const BlockIo& io = entry.io;
    if (io.op != abi::kIoOpFlush && !limiter_->unlimited()) {
      const uint32_t data = io.op == abi::kIoOpRead || io.op == abi::kIoOpWrite ? io.length : 0;
      const int64_t wait = limiter_->TryAdmit(IsWrite(io.op), data, now_ns, entry.paid);
      if (wait > 0) {
        next_wait_ns_ = wait;
        return;
      }
    }
    limiter_->RecordWait(now_ns - entry.since_ns);
    head_ = (head_ + 1) % waiting_.size();
    --count_;
    inner_->Submit(entry.tag, io);
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

void ThrottlingBackend::EndOfTurn() {
  if (count_ > 0 && !timer_armed_) ArmTimer();
  inner_->EndOfTurn();
}

}  // namespace blk::server
