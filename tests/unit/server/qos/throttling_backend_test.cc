// The throttling wrapper around a backend, driven without a queue: requests within the limits
// go straight through, the others wait in order for the timer the turn arms, the oldest is
// charged once however often the timer fires, and a limit raised meanwhile lets them go at its
// next firing.
#include "server/qos/throttling_backend.h"

#include <cerrno>
#include <memory>
#include <utility>
#include <vector>

#include "common/monotonic_clock.h"
#include "gtest/gtest.h"
#include "server/ublk/abi.h"
#include "tests/unit/server/recording_completer.h"

namespace blk::server {
namespace {

// Records what reaches it.
class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(std::vector<uint16_t>* submitted) : submitted_(submitted) {}
  absl::Status Attach(Ring&, int, Completer) override { return absl::OkStatus(); }
  void Submit(uint16_t tag, const BlockIo&) override { submitted_->push_back(tag); }
  void OnCompletion(uint16_t tag, const io_uring_cqe&) override { completed_.push_back(tag); }
  std::vector<uint16_t> completed_;

 private:
  std::vector<uint16_t>* submitted_;
};

class ThrottlingBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Ring>> ring = Ring::Create(16);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = std::move(*ring);
    limiter_ = std::make_shared<Limiter>(IoLimits{}, 512 * 1024);
    auto inner = std::make_unique<FakeBackend>(&submitted_);
    inner_ = inner.get();
    backend_ = std::make_unique<ThrottlingBackend>(std::move(inner), limiter_, 8);
    ASSERT_TRUE(backend_->Attach(*ring_, 0, done_.completer()).ok());
  }
  static BlockIo Read() {
    BlockIo io;
    io.op = abi::kIoOpRead;
    io.length = 4096;
    return io;
  }
  // The SQEs queued since the last call.
  std::vector<const io_uring_sqe*> Queued() {
    io_uring* ring = ring_->get();
    std::vector<const io_uring_sqe*> sqes;
    for (unsigned i = seen_; i < ring->sq.sqe_tail; ++i) {
      sqes.push_back(&ring->sq.sqes[i & ring->sq.ring_mask]);
    }
    seen_ = ring->sq.sqe_tail;
    return sqes;
  }

  std::unique_ptr<Ring> ring_;
  std::shared_ptr<Limiter> limiter_;
  std::vector<uint16_t> submitted_;
  FakeBackend* inner_ = nullptr;
  std::unique_ptr<ThrottlingBackend> backend_;
  RecordingCompleter done_;
  unsigned seen_ = 0;
};

TEST_F(ThrottlingBackendTest, WithoutLimitsRequestsGoStraightThroughAndNoTimerIsArmed) {
  for (uint16_t tag = 0; tag < 8; ++tag) backend_->Submit(tag, Read());
  backend_->EndOfTurn();
  EXPECT_EQ(submitted_.size(), 8u);
  EXPECT_TRUE(Queued().empty());
  io_uring_cqe cqe{};
  cqe.user_data = EncodeUserData(CqeKind::kBackend, 3);
  backend_->OnCompletion(3, cqe);
  EXPECT_EQ(inner_->completed_, std::vector<uint16_t>{3});
}

TEST_F(ThrottlingBackendTest, RequestsOverTheLimitWaitInOrderForTheTimer) {
  IoLimits limits;
  limits.read_iops = {1, 1};  // one read a second: the first goes, the rest wait
  limiter_->Set(limits, MonotonicNs());
  backend_->Submit(5, Read());
  backend_->Submit(2, Read());
  BlockIo flush;
  flush.op = abi::kIoOpFlush;
  backend_->Submit(7, flush);  // behind a waiting read, a flush waits too
  EXPECT_EQ(submitted_, std::vector<uint16_t>{5});
  backend_->EndOfTurn();
  std::vector<const io_uring_sqe*> sqes = Queued();
  ASSERT_EQ(sqes.size(), 1u);
  EXPECT_EQ(sqes[0]->opcode, IORING_OP_TIMEOUT);
  ASSERT_EQ(KindOf(sqes[0]->user_data), CqeKind::kThrottle);
  // The timer is capped so that a raised limit is seen soon.
  const auto* timeout = reinterpret_cast<const __kernel_timespec*>(sqes[0]->addr);
  EXPECT_EQ(timeout->tv_sec, 0);
  EXPECT_EQ(timeout->tv_nsec, ThrottlingBackend::kMaxWaitMs * 1000000);
  // One armed timer at a time.
  backend_->EndOfTurn();
  EXPECT_TRUE(Queued().empty());

  limits.read_iops = {1000000, 0};
  limiter_->Set(limits, MonotonicNs());
  io_uring_cqe fired{};
  fired.user_data = sqes[0]->user_data;
  fired.res = -ETIME;
  backend_->OnCompletion(0, fired);
  EXPECT_EQ(submitted_, (std::vector<uint16_t>{5, 2, 7}));
  EXPECT_TRUE(inner_->completed_.empty());  // the timer is the wrapper's, not the backend's
  EXPECT_EQ(limiter_->counts().requests, 2u);
  backend_->EndOfTurn();
  EXPECT_TRUE(Queued().empty());
}

TEST_F(ThrottlingBackendTest, TheOldestWaitingRequestIsChargedOnceHoweverOftenTheTimerFires) {
  IoLimits limits;
  limits.read_iops = {1, 1};
  limiter_->Set(limits, MonotonicNs());
  backend_->Submit(1, Read());  // goes
  backend_->Submit(2, Read());  // its place: a second from now
  backend_->Submit(3, Read());  // behind it, not charged yet
  EXPECT_EQ(submitted_, std::vector<uint16_t>{1});
  io_uring_cqe fired{};
  fired.user_data = EncodeUserData(CqeKind::kThrottle, 0);
  fired.res = -ETIME;
  for (int i = 0; i < 3; ++i) {
    backend_->EndOfTurn();
    backend_->OnCompletion(0, fired);
  }
  EXPECT_EQ(submitted_, std::vector<uint16_t>{1});
  // Two charged (1 and 2): a read asking elsewhere now goes two seconds from now, not four.
  const int64_t now = MonotonicNs();
  const int64_t wait = limiter_->Reserve(false, 4096, now) - now;
  EXPECT_GT(wait, 1900000000);
  EXPECT_LE(wait, 2000000000);
}

TEST_F(ThrottlingBackendTest, AStopHandsTheWaitingRequestsBackUnstarted) {
  IoLimits limits;
  limits.read_iops = {1, 1};
  limiter_->Set(limits, MonotonicNs());
  for (uint16_t tag : {1, 2, 3}) backend_->Submit(tag, Read());
  backend_->EndOfTurn();
  RecordingCompleter released;
  backend_->ReleaseUnstarted(released.completer());
  EXPECT_EQ(released.Next(), std::make_pair(uint16_t{2}, 0));
  EXPECT_EQ(released.Next(), std::make_pair(uint16_t{3}, 0));
  EXPECT_EQ(released.untaken(), 0u);
  // The timer armed before finds nothing: the backend never sees them, and nothing completes.
  limits.read_iops = {1000000, 0};
  limiter_->Set(limits, MonotonicNs());
  io_uring_cqe fired{};
  fired.user_data = EncodeUserData(CqeKind::kThrottle, 0);
  fired.res = -ETIME;
  backend_->OnCompletion(0, fired);
  EXPECT_EQ(submitted_, std::vector<uint16_t>{1});
  EXPECT_EQ(done_.untaken(), 0u);
}

TEST_F(ThrottlingBackendTest, AfterFailHeldWaitingRequestsFailWithEioAtTheNextTimer) {
  IoLimits limits;
  limits.read_iops = {1, 1};  // a forced delete must not wait a second per request
  limiter_->Set(limits, MonotonicNs());
  for (uint16_t tag : {1, 2, 3}) backend_->Submit(tag, Read());
  backend_->EndOfTurn();
  ASSERT_EQ(Queued().size(), 1u);  // the timer, at most kMaxWaitMs away
  limiter_->FailHeld();
  io_uring_cqe fired{};
  fired.user_data = EncodeUserData(CqeKind::kThrottle, 0);
  fired.res = -ETIME;
  backend_->OnCompletion(0, fired);
  EXPECT_EQ(done_.Take(2), -EIO);
  EXPECT_EQ(done_.Take(3), -EIO);
  // One over the limit that arrives now fails at once; the backend saw only the first.
  backend_->Submit(4, Read());
  EXPECT_EQ(done_.Take(4), -EIO);
  EXPECT_EQ(submitted_, std::vector<uint16_t>{1});
  backend_->EndOfTurn();
  EXPECT_TRUE(Queued().empty());
}

}  // namespace
}  // namespace blk::server
