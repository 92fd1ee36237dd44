#include "server/ublk/ring.h"

#include "gtest/gtest.h"

namespace blk::server {
namespace {

constexpr unsigned kTaskWorkWithoutWakeup = IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN;

TEST(Ring, WakeForTaskWorkLeavesOutTheFlagsThatWouldNotWakeTheThread) {
  absl::StatusOr<std::unique_ptr<Ring>> ring = Ring::Create(8, false, /*wake_for_task_work=*/true);
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_EQ((*ring)->setup_flags() & kTaskWorkWithoutWakeup, 0u);
}

}  // namespace
}  // namespace blk::server
