// Holds a queue's requests that are over their device's limits (Limiter) and hands them to the
// backend in arrival order once their time comes (the oldest reserves its place with the
// Limiter, the others wait behind it); never fails one. Wraps every queue's backend: while
// the device has no limits a request costs one relaxed load more. Waiting requests are retried
// on a timer (IORING_OP_TIMEOUT, CqeKind::kThrottle) set for when the first may be admitted, at
// most kMaxWaitMs ahead so that a limit raised meanwhile is seen soon.
#pragma once

#include <memory>
#include <vector>

#include "server/backend.h"
#include "server/qos/limiter.h"

namespace blk::server {

class ThrottlingBackend final : public Backend {
 public:
  static constexpr int64_t kMaxWaitMs = 50;

  ThrottlingBackend(std::unique_ptr<Backend> inner, std::shared_ptr<Limiter> limiter,
                    uint16_t queue_depth);

  std::vector<int> Files() const override { return inner_->Files(); }
  absl::Status Attach(Ring& ring, int first_file, Completer completer) override;
  void Submit(uint16_t tag, const BlockIo& io) override;
  void OnCompletion(uint16_t tag, const io_uring_cqe& cqe) override;
  void EndOfTurn() override;
  void ReleaseUnstarted(Completer released) override;

 private:
  struct Waiting {
    uint16_t tag = 0;
    BlockIo io;
    int64_t since_ns = 0;
    // Once the queue's oldest: its place reserved, when it may go, under which limits.
    bool reserved = false;
    int64_t go_at_ns = 0;
    uint64_t generation = 0;
  };
  // True when the request may go at `now_ns` (reserving its place on the first ask), else false
  // with next_wait_ns_ set. One reserved under limits since changed goes at once: its charge is
  // in the backlog the Limiter rescaled, and a raised limit should not wait on the old rate.
  bool Ready(Waiting& entry, int64_t now_ns);
  // Submits waiting requests in order until one must wait; remembers how long.
  void AdmitWaiting(int64_t now_ns);
  void ArmTimer();
  // Hands every waiting request, oldest first, to `to` with `result`.
  void EndEveryWaiting(Completer to, int32_t result);

  std::unique_ptr<Backend> inner_;
  std::shared_ptr<Limiter> limiter_;
  Ring* ring_ = nullptr;
  Completer completer_;
  // A ring buffer of queue_depth entries: a tag waits at most once.
  std::vector<Waiting> waiting_;
  size_t head_ = 0;
  size_t count_ = 0;
  int64_t next_wait_ns_ = 0;
  bool timer_armed_ = false;
  __kernel_timespec timeout_{};
};

}  // namespace blk::server
