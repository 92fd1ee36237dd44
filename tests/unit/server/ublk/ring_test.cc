#include "server/ublk/ring.h"

#include <fcntl.h>

#include <cerrno>

#include "gtest/gtest.h"

namespace blk::server {
namespace {

constexpr unsigned kTaskWorkWithoutWakeup = IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN;

TEST(Ring, WakeForTaskWorkLeavesOutTheFlagsThatWouldNotWakeTheThread) {
  absl::StatusOr<std::unique_ptr<Ring>> ring = Ring::Create(8, false, /*wake_for_task_work=*/true);
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_EQ((*ring)->setup_flags() & kTaskWorkWithoutWakeup, 0u);
}

TEST(Ring, CloseFdKeepsTheCompletionsReadable) {
  absl::StatusOr<std::unique_ptr<Ring>> ring = Ring::Create(8, false, true);
  ASSERT_TRUE(ring.ok()) << ring.status();
  (*ring)->RegisterFdForThisThread();
  io_uring* uring = (*ring)->get();
  const int fd = uring->ring_fd;
  io_uring_sqe* sqe = (*ring)->GetSqe();
  ASSERT_NE(sqe, nullptr);
  io_uring_prep_nop(sqe);
  sqe->user_data = 42;
  ASSERT_EQ(io_uring_submit(uring), 1);

  (*ring)->CloseFd();

  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
  io_uring_cqe* cqe = nullptr;
  ASSERT_EQ(io_uring_peek_cqe(uring, &cqe), 0);
  ASSERT_NE(cqe, nullptr);
  EXPECT_EQ(cqe->user_data, 42u);
  EXPECT_EQ(cqe->res, 0);
  io_uring_cqe_seen(uring, cqe);
  (*ring)->CloseFd();  // a second close changes nothing
}

}  // namespace
}  // namespace blk::server
