// A forwarding queue's own side of the shared connection, without a server: what it does when
// queue 0's ring cannot be reached, and that a result posted to its ring is a kResult CQE that
// needs no backend.
#include "server/nbd/forwarding_backend.h"

#include <sys/eventfd.h>

#include <cerrno>

#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "server/nbd/backend.h"
#include "tests/unit/server/recording_completer.h"

namespace blk::server::nbd {
namespace {

constexpr uint16_t kDepth = 4;

// Hands every CQE of `ring` to `backend`, or to `done` for kResult; how many there were.
int Drain(Ring& ring, ForwardingBackend& backend, RecordingCompleter& done) {
  io_uring_submit_and_wait(ring.get(), 1);
  int seen = 0;
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(ring.get(), &cqe) == 0 && cqe != nullptr) {
    ++seen;
    if (KindOf(cqe->user_data) == CqeKind::kResult) {
      done.completer().Complete(TagOf(cqe->user_data), cqe->res);
    } else {
      EXPECT_EQ(KindOf(cqe->user_data), CqeKind::kBackend);
      backend.OnCompletion(TagOf(cqe->user_data), *cqe);
    }
    io_uring_cqe_seen(ring.get(), cqe);
  }
  return seen;
}

TEST(ForwardingBackend, WithoutQueue0RunningAttachIsRefused) {
  auto shared = std::make_shared<SharedConnection>(2, kDepth);
  std::unique_ptr<Ring> ring = std::move(*Ring::Create(8));
  RecordingCompleter done;
  ForwardingBackend backend(shared, 1);
  EXPECT_EQ(backend.Attach(*ring, 0, done.completer()).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ForwardingBackend, ARequestThatCannotReachQueue0FailsWithEio) {
  auto shared = std::make_shared<SharedConnection>(2, kDepth);
  // Not an io_uring: MSG_RING to it fails.
  UniqueFd not_a_ring(::eventfd(0, EFD_CLOEXEC));
  shared->ring_fds[0].store(not_a_ring.get());
  std::unique_ptr<Ring> ring = std::move(*Ring::Create(8));
  RecordingCompleter done;
  ForwardingBackend backend(shared, 1);
  ASSERT_TRUE(backend.Attach(*ring, 0, done.completer()).ok());
  EXPECT_EQ(shared->ring_fds[1].load(), ring->get()->ring_fd);

  BlockIo io;
  io.length = 4096;
  backend.Submit(2, io);
  EXPECT_EQ(done.untaken(), 0u);  // forwarded: nothing known yet
  EXPECT_EQ(Drain(*ring, backend, done), 1);
  EXPECT_EQ(done.Take(2), -EIO);
  EXPECT_EQ(done.untaken(), 0u);
}

// Queue 1's forwarding backend, with queue 0's ring there to receive what it forwards.
class ForwardingToQueue0 : public ::testing::Test {
 protected:
  void SetUp() override {
    shared->ring_fds[0].store(owner->get()->ring_fd);
    ASSERT_TRUE(backend.Attach(*ring, 0, done.completer()).ok());
  }

  std::shared_ptr<SharedConnection> shared = std::make_shared<SharedConnection>(2, kDepth);
  std::unique_ptr<Ring> owner = std::move(*Ring::Create(8));
  std::unique_ptr<Ring> ring = std::move(*Ring::Create(8));
  RecordingCompleter done;
  ForwardingBackend backend{shared, 1};
};

TEST_F(ForwardingToQueue0, AResultPostedByQueue0ArrivesAsAResultCqeOfTheTag) {
  // What queue 0's backend does with a finished forwarded request (nbd::Backend::Reply).
  io_uring_sqe* sqe = owner->GetSqe();
  io_uring_prep_msg_ring(sqe, ring->get()->ring_fd, 8192, EncodeUserData(CqeKind::kResult, 3), 0);
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  ASSERT_EQ(io_uring_submit(owner->get()), 1);
  EXPECT_EQ(Drain(*ring, backend, done), 1);
  EXPECT_EQ(done.Take(3), 8192);
}

// Fills the submission queue with NOPs the ring will not submit (Ring::HoldSubmissionsForTest);
// how many.
unsigned FillAndHold(Ring& ring) {
  unsigned nops = 0;
  while (io_uring_sqe* nop = io_uring_get_sqe(ring.get())) {
    io_uring_prep_nop(nop);
    ++nops;
  }
  ring.HoldSubmissionsForTest(true);
  return nops;
}

// Whether queue 0's ring got the forwarded request of `slot`.
bool Forwarded(Ring& owner, uint32_t slot) {
  io_uring_cqe* cqe = nullptr;
  __kernel_timespec wait{.tv_sec = 5, .tv_nsec = 0};
  if (io_uring_wait_cqe_timeout(owner.get(), &cqe, &wait) != 0) return false;
  const bool forwarded = cqe->user_data == Backend::ForwardedRequestUserData(slot);
  io_uring_cqe_seen(owner.get(), cqe);
  return forwarded;
}

TEST_F(ForwardingToQueue0, ARequestThatFindsNoFreeSqeIsForwardedOnALaterTurn) {
  const unsigned nops = FillAndHold(*ring);
  BlockIo io;
  io.length = 4096;
  backend.Submit(1, io);
  backend.EndOfTurn();
  EXPECT_TRUE(ring->TakeSqeShortage());
  EXPECT_EQ(done.untaken(), 0u);  // not failed, not lost: waiting

  ring->HoldSubmissionsForTest(false);
  ASSERT_EQ(io_uring_submit_and_wait(ring->get(), nops), static_cast<int>(nops));
  io_uring_cq_advance(ring->get(), nops);
  backend.EndOfTurn();
  ASSERT_EQ(io_uring_submit(ring->get()), 1);
  EXPECT_TRUE(Forwarded(*owner, shared->Slot(1, 1)));
  EXPECT_EQ(done.untaken(), 0u);
}

TEST_F(ForwardingToQueue0, AForwardThatFailedForAMomentIsSentAgainNotFailed) {
  BlockIo io;
  io.length = 4096;
  backend.Submit(2, io);
  ASSERT_EQ(io_uring_submit(ring->get()), 1);
  EXPECT_TRUE(Forwarded(*owner, shared->Slot(1, 2)));

  // The kernel's answer when queue 0's CQ had no room (the MSG_RING's own CQE on this ring).
  for (const int transient : {-EOVERFLOW, -EAGAIN, -ENOMEM}) {
    io_uring_cqe failed{};
    failed.user_data = EncodeUserData(CqeKind::kBackend, 2);
    failed.res = transient;
    backend.OnCompletion(2, failed);
    EXPECT_EQ(done.untaken(), 0u) << transient;
    ASSERT_EQ(io_uring_submit(ring->get()), 1);
    EXPECT_TRUE(Forwarded(*owner, shared->Slot(1, 2))) << transient;
  }
}

}  // namespace
}  // namespace blk::server::nbd
