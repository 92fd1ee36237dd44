#include "server/ublk/sqe_waitlist.h"

#include <vector>

#include "gtest/gtest.h"

namespace blk::server {
namespace {

TEST(SqeWaitlist, RetriesInOrderAndStopsAtTheFirstThatStillFindsNoSqe) {
  SqeWaitlist waitlist(8);
  waitlist.Add(5);
  waitlist.Add(2);
  waitlist.Add(7);
  std::vector<uint32_t> tried;
  waitlist.RetryEach([&](uint32_t id) {
    tried.push_back(id);
    return id != 2;  // 2 finds no SQE again
  });
  EXPECT_EQ(tried, (std::vector<uint32_t>{5, 2}));
  EXPECT_EQ(waitlist.size(), 2u);

  tried.clear();
  waitlist.RetryEach([&](uint32_t id) {
    tried.push_back(id);
    return true;
  });
  EXPECT_EQ(tried, (std::vector<uint32_t>{2, 7}));
  EXPECT_TRUE(waitlist.empty());
}

TEST(SqeWaitlist, AnIdWaitsOnceAndCanWaitAgainAfterItsTurn) {
  SqeWaitlist waitlist(4);
  waitlist.Add(3);
  waitlist.Add(3);
  waitlist.Add(9);  // beyond the capacity: not an id of this list
  EXPECT_EQ(waitlist.size(), 1u);
  waitlist.RetryEach([](uint32_t) { return true; });
  waitlist.Add(3);
  EXPECT_EQ(waitlist.size(), 1u);
}

TEST(SqeWaitlist, WrapsAroundItsCapacity) {
  SqeWaitlist waitlist(3);
  std::vector<uint32_t> tried;
  for (uint32_t round = 0; round < 4; ++round) {
    waitlist.Add(round % 3);
    waitlist.Add((round + 1) % 3);
    waitlist.RetryEach([&](uint32_t id) {
      tried.push_back(id);
      return true;
    });
  }
  EXPECT_EQ(tried, (std::vector<uint32_t>{0, 1, 1, 2, 2, 0, 0, 1}));
}

}  // namespace
}  // namespace blk::server
