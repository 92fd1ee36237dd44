#pragma once

#include <liburing.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace blk::server {

// What a completion belongs to, kept in the top byte of user_data; the tag follows, and 32 bits
// the backend may use as it likes (kBackend only).
enum class CqeKind : uint8_t {
  kUblkCmd = 1,  // a ublk I/O command of the tag
  kBackend = 2,  // the backend's own operation, handed to Backend::OnCompletion
  kStop = 3,     // the queue's stop eventfd
  // The tag's final result in cqe->res, posted to this ring by another ring's thread
  // (IORING_OP_MSG_RING): the queue completes the tag without asking its backend.
  kResult = 4,
  // UBLK_F_BATCH_IO: the queue's multishot FETCH_IO_CMDS, one of its COMMIT_IO_CMDS (extra: which
  // commit buffer), its PREP_IO_CMDS.
  kBatchFetch = 5,
  kBatchCommit = 6,
  kBatchPrep = 7,
  // A backend's throttling timer (ThrottlingBackend): handed to Backend::OnCompletion like
  // kBackend.
  kThrottle = 8,
};

inline constexpr uint64_t EncodeUserData(CqeKind kind, uint16_t tag, uint32_t extra = 0) {
  return (uint64_t{static_cast<uint8_t>(kind)} << 56) | (uint64_t{tag} << 32) | extra;
}
inline constexpr CqeKind KindOf(uint64_t user_data) {
  return static_cast<CqeKind>(user_data >> 56);
}
inline constexpr uint16_t TagOf(uint64_t user_data) {
  return static_cast<uint16_t>(user_data >> 32);
}
inline constexpr uint32_t ExtraOf(uint64_t user_data) { return static_cast<uint32_t>(user_data); }

// An io_uring owned by one thread. Created with SINGLE_ISSUER and DEFER_TASKRUN (or COOP_TASKRUN)
// where the kernel accepts them, plain otherwise. `big_entries`: 128-byte SQEs and 32-byte CQEs
// (IORING_SETUP_SQE128 | CQE32), which NVMe passthrough needs; ublk commands work on either.
// `wake_for_task_work`: neither DEFER_TASKRUN nor COOP_TASKRUN, so that the kernel wakes the thread
// to run the ring's task work wherever it sleeps.
class Ring {
 public:
  static absl::StatusOr<std::unique_ptr<Ring>> Create(unsigned entries, bool big_entries = false,
                                                      bool wake_for_task_work = false);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  io_uring* get() { return &ring_; }

  // Lets the calling thread enter the ring by a registered index instead of its fd (no fd lookup
  // per io_uring_enter). Per thread: call it on the one thread that submits and waits. Kernels
  // before 5.18 refuse it; the ring then works by its fd as before.
  void RegisterFdForThisThread() { io_uring_register_ring_fd(&ring_); }
  unsigned setup_flags() const { return setup_flags_; }

  // A free SQE; when the submission queue is full, submits what is queued first. nullptr only if
  // even that fails (the kernel refuses the submission, e.g. EBUSY while its CQ overflows): the
  // caller keeps the work (SqeWaitlist) and tries again on a later turn, and the ring remembers
  // the shortage until TakeSqeShortage.
  io_uring_sqe* GetSqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    return sqe != nullptr ? sqe : GetSqeAfterSubmit();
  }
  // Whether GetSqe gave nullptr since the last call: the loop then waits with a short time-out,
  // so that work kept for lack of an SQE is retried even if no completion arrives.
  bool TakeSqeShortage() {
    const bool shortage = sqe_shortage_;
    sqe_shortage_ = false;
    return shortage;
  }

  // Tests only: a full submission queue stays full (GetSqe does not submit), as when the kernel
  // refuses submissions.
  void HoldSubmissionsForTest(bool hold) { hold_submissions_for_test_ = hold; }

 private:
  Ring() = default;
  io_uring_sqe* GetSqeAfterSubmit();

  io_uring ring_{};
  unsigned setup_flags_ = 0;
  bool sqe_shortage_ = false;
  bool hold_submissions_for_test_ = false;
};

}  // namespace blk::server
