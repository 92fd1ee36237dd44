#include "server/ublk/ring.h"

#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace blk::server {

absl::StatusOr<std::unique_ptr<Ring>> Ring::Create(unsigned entries, bool big_entries,
                                                   bool wake_for_task_work) {
  std::unique_ptr<Ring> ring(new Ring());
  // Most wanted first; kernels before 6.1 (DEFER_TASKRUN) or 6.0 (SINGLE_ISSUER) say EINVAL.
  // DEFER_TASKRUN runs task work only inside io_uring_enter on this ring; COOP_TASKRUN posts it
  // without waking a sleeping thread.
  const std::vector<unsigned> attempts =
      wake_for_task_work ? std::vector<unsigned>{IORING_SETUP_SINGLE_ISSUER, 0}
                         : std::vector<unsigned>{
                               IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
                               IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
                               IORING_SETUP_COOP_TASKRUN,
                               0,
                           };
  int rc = -EINVAL;
  const unsigned entry_flags = big_entries ? IORING_SETUP_SQE128 | IORING_SETUP_CQE32 : 0;
  for (unsigned flags : attempts) {
    io_uring_params params{};
    params.flags = flags | entry_flags;
    params.cq_entries = entries * 2;
    params.flags |= IORING_SETUP_CQSIZE;
    rc = io_uring_queue_init_params(entries, &ring->ring_, &params);
    if (rc == 0) {
      ring->setup_flags_ = flags | entry_flags;
      return ring;
    }
    if (rc != -EINVAL) break;
  }
  return absl::ErrnoToStatus(-rc, absl::StrCat("io_uring_queue_init(", entries, " entries",
                                               big_entries ? ", SQE128|CQE32" : "", ")"));
}

Ring::~Ring() { io_uring_queue_exit(&ring_); }

io_uring_sqe* Ring::GetSqeAfterSubmit() {
  if (!hold_submissions_for_test_) io_uring_submit(&ring_);
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) sqe_shortage_ = true;
  return sqe;
}

}  // namespace blk::server
