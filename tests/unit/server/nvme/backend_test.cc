// The NVMe data path without a device: the SQEs a request turns into, read back from a real
// (SQE128 | CQE32) ring before submission, and how completions of split requests add up.
#include "server/nvme/backend.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/nvme/storage.h"
#include "server/ublk/abi.h"
#include "tests/unit/server/recording_completer.h"

namespace blk::server {
namespace {

constexpr int kFileIndex = 1;

nvme::NamespaceTarget Target(uint32_t lba_shift = 9) {
  nvme::NamespaceProfile profile;
  profile.nsid = 1;
  profile.format.size_blocks = (uint64_t{256} << 20) >> lba_shift;
  profile.format.capacity_blocks = profile.format.size_blocks;
  profile.format.lba_shift = lba_shift;
  profile.format.lba_bytes = 1u << lba_shift;
  profile.controller.max_transfer_bytes = 128 * 1024;
  profile.controller.write_zeroes = true;
  profile.controller.dataset_management = true;
  profile.controller.volatile_write_cache = true;
  absl::StatusOr<nvme::NamespaceTarget> target =
      nvme::MakeNamespaceTarget(profile, 1 << 20, 64 << 20);
  EXPECT_TRUE(target.ok()) << target.status();
  return *target;
}

class NvmeBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Ring>> ring = Ring::Create(64, /*big_entries=*/true);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = std::move(*ring);
    backend_ = std::make_unique<NvmeBackend>(/*fd=*/-1, Target(), 4, 512 * 1024);
    ASSERT_TRUE(backend_->Attach(*ring_, kFileIndex, done_.completer()).ok());
  }

  // The SQEs queued since the last call, without submitting them.
  std::vector<const io_uring_sqe*> Queued() {
    io_uring* ring = ring_->get();
    std::vector<const io_uring_sqe*> sqes;
    for (unsigned i = seen_; i < ring->sq.sqe_tail; ++i) {
      sqes.push_back(&ring->sq.sqes[(i & ring->sq.ring_mask) << 1]);
    }
    seen_ = ring->sq.sqe_tail;
    return sqes;
  }
  static nvme::UringCmd CmdOf(const io_uring_sqe* sqe) {
    nvme::UringCmd cmd;
    std::memcpy(&cmd, reinterpret_cast<const unsigned char*>(sqe) + 48, sizeof(cmd));
    return cmd;
  }
  static io_uring_cqe Cqe(int32_t res) {
    io_uring_cqe cqe{};
    cqe.res = res;
    return cqe;
  }

  std::unique_ptr<Ring> ring_;
  std::unique_ptr<NvmeBackend> backend_;
  RecordingCompleter done_;
  unsigned seen_ = 0;
  std::vector<char> buffer_ = std::vector<char>(512 * 1024);
};

TEST_F(NvmeBackendTest, RingWithoutBigEntriesIsRefused) {
  absl::StatusOr<std::unique_ptr<Ring>> small = Ring::Create(8);
  ASSERT_TRUE(small.ok());
  NvmeBackend backend(-1, Target(), 1, 4096);
  EXPECT_FALSE(backend.Attach(**small, 0, done_.completer()).ok());
}

TEST_F(NvmeBackendTest, WriteBeyondMdtsIsSplitAndCompletesOnceWithTheWholeLength) {
  BlockIo io;
  io.op = abi::kIoOpWrite;
  io.flags = abi::kIoFFua;
  io.offset = 8192;
  io.length = 256 * 1024;
  io.buffer = buffer_.data();
  backend_->Submit(3, io);
  ASSERT_EQ(done_.untaken(), 0u);
  std::vector<const io_uring_sqe*> sqes = Queued();
  ASSERT_EQ(sqes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(sqes[i]->opcode, IORING_OP_URING_CMD);
    EXPECT_EQ(sqes[i]->fd, kFileIndex);
    EXPECT_EQ(sqes[i]->flags & IOSQE_FIXED_FILE, IOSQE_FIXED_FILE);
    EXPECT_EQ(sqes[i]->uring_cmd_flags, 0u);
    EXPECT_EQ(TagOf(sqes[i]->user_data), 3);
    const nvme::UringCmd cmd = CmdOf(sqes[i]);
    EXPECT_EQ(cmd.opcode, nvme::kOpWrite);
    // The volume starts 1 MiB (2048 LBAs) into the namespace.
    EXPECT_EQ(cmd.cdw10, 2048u + 16 + 256 * i);
    EXPECT_EQ(cmd.cdw12, nvme::kCdw12Fua | 255);
    EXPECT_EQ(cmd.addr, reinterpret_cast<uintptr_t>(buffer_.data()) + 128 * 1024 * i);
    EXPECT_EQ(cmd.data_len, 128u * 1024);
  }
  backend_->OnCompletion(3, Cqe(0));
  EXPECT_EQ(done_.untaken(), 0u);
  backend_->OnCompletion(3, Cqe(0));
  EXPECT_EQ(done_.Take(3), 256 * 1024);
}

TEST_F(NvmeBackendTest, APieceThatFindsNoFreeSqeIsIssuedOnALaterTurnNotFailed) {
  // One free SQE, and a kernel that takes no submission (as while its CQ overflows).
  for (unsigned left = io_uring_sq_space_left(ring_->get()); left > 1; --left) {
    io_uring_prep_nop(io_uring_get_sqe(ring_->get()));
  }
  Queued();
  ring_->HoldSubmissionsForTest(true);
  BlockIo io;
  io.op = abi::kIoOpWrite;
  io.offset = 8192;
  io.length = 256 * 1024;
  io.buffer = buffer_.data();
  backend_->Submit(3, io);
  backend_->EndOfTurn();
  ASSERT_EQ(Queued().size(), 1u);
  EXPECT_TRUE(ring_->TakeSqeShortage());
  backend_->OnCompletion(3, Cqe(0));
  EXPECT_EQ(done_.untaken(), 0u);  // neither failed nor dropped: its second piece waits

  ring_->HoldSubmissionsForTest(false);
  backend_->EndOfTurn();  // the loop's next turn
  std::vector<const io_uring_sqe*> sqes = Queued();
  ASSERT_EQ(sqes.size(), 1u);
  EXPECT_EQ(CmdOf(sqes[0]).cdw10, 2048u + 16 + 256);
  EXPECT_EQ(done_.untaken(), 0u);
  backend_->OnCompletion(3, Cqe(0));
  EXPECT_EQ(done_.Take(3), 256 * 1024);
}

TEST_F(NvmeBackendTest, AFailedPieceFailsTheRequestOnlyAfterEveryPieceCompleted) {
  BlockIo io;
  io.op = abi::kIoOpRead;
  io.length = 384 * 1024;
  io.buffer = buffer_.data();
  backend_->Submit(0, io);
  ASSERT_EQ(done_.untaken(), 0u);
  ASSERT_EQ(Queued().size(), 3u);
  // Unrecovered read error (SCT 2, SC 0x81).
  backend_->OnCompletion(0, Cqe((2 << 8) | 0x81));
  EXPECT_EQ(done_.untaken(), 0u);
  backend_->OnCompletion(0, Cqe(0));
  EXPECT_EQ(done_.untaken(), 0u);
  backend_->OnCompletion(0, Cqe(0));
  EXPECT_EQ(done_.Take(0), -ENODATA);
}

TEST_F(NvmeBackendTest, ZeroCopyAddressesTheRegisteredBufferFromItsStart) {
  BlockIo io;
  io.op = abi::kIoOpRead;
  io.length = 256 * 1024;
  io.buffer_index = 2;
  backend_->Submit(2, io);
  ASSERT_EQ(done_.untaken(), 0u);
  std::vector<const io_uring_sqe*> sqes = Queued();
  ASSERT_EQ(sqes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(sqes[i]->uring_cmd_flags, IORING_URING_CMD_FIXED);
    EXPECT_EQ(sqes[i]->buf_index, 2);
    EXPECT_EQ(CmdOf(sqes[i]).addr, 128u * 1024 * i);
  }
}

TEST_F(NvmeBackendTest, CopyModeUsesTheRegisteredTagBufferAtItsAddress) {
  BlockIo io;
  io.op = abi::kIoOpWrite;
  io.length = 256 * 1024;
  io.buffer = buffer_.data();
  io.buffer_index = 1;
  backend_->Submit(1, io);
  ASSERT_EQ(done_.untaken(), 0u);
  std::vector<const io_uring_sqe*> sqes = Queued();
  ASSERT_EQ(sqes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(sqes[i]->uring_cmd_flags, IORING_URING_CMD_FIXED);
    EXPECT_EQ(sqes[i]->buf_index, 1);
    EXPECT_EQ(CmdOf(sqes[i]).addr, reinterpret_cast<uintptr_t>(buffer_.data()) + 128 * 1024 * i);
  }
}

TEST_F(NvmeBackendTest, DiscardIsOneDeallocateWithItsRangeInThePerTagState) {
  BlockIo io;
  io.op = abi::kIoOpDiscard;
  io.offset = 1 << 20;
  io.length = 1 << 20;
  backend_->Submit(1, io);
  ASSERT_EQ(done_.untaken(), 0u);
  std::vector<const io_uring_sqe*> sqes = Queued();
  ASSERT_EQ(sqes.size(), 1u);
  const nvme::UringCmd cmd = CmdOf(sqes[0]);
  EXPECT_EQ(cmd.opcode, nvme::kOpDatasetManagement);
  EXPECT_EQ(cmd.cdw11, nvme::kDsmAttrDeallocate);
  EXPECT_EQ(sqes[0]->uring_cmd_flags, 0u);
  ASSERT_EQ(cmd.data_len, sizeof(nvme::DsmRange));
  nvme::DsmRange range;
  std::memcpy(&range, reinterpret_cast<const void*>(cmd.addr), sizeof(range));
  EXPECT_EQ(range.starting_lba, 2048u + 2048);
  EXPECT_EQ(range.length_blocks, 2048u);
  backend_->OnCompletion(1, Cqe(0));
  EXPECT_EQ(done_.Take(1), 1 << 20);
}

TEST_F(NvmeBackendTest, MisalignedAndOutOfRangeRequestsFailWithEinvalAndQueueNothing) {
  BlockIo io;
  io.op = abi::kIoOpWrite;
  io.buffer = buffer_.data();
  io.offset = 512;  // fine for 512-byte LBAs ...
  io.length = 4096;
  backend_->Submit(0, io);
  ASSERT_EQ(done_.untaken(), 0u);
  Queued();
  backend_->OnCompletion(0, Cqe(0));
  EXPECT_EQ(done_.Take(0), 4096);
  io.offset = 64 << 20;  // ... but the volume is 64 MiB
  backend_->Submit(0, io);
  EXPECT_EQ(done_.Take(0), -EINVAL);
  EXPECT_TRUE(Queued().empty());

  NvmeBackend four_k(-1, Target(12), 1, 512 * 1024);
  ASSERT_TRUE(four_k.Attach(*ring_, kFileIndex, done_.completer()).ok());
  io.offset = 512;
  four_k.Submit(0, io);
  EXPECT_EQ(done_.Take(0), -EINVAL);
  EXPECT_TRUE(Queued().empty());
}

TEST_F(NvmeBackendTest, ARequestBeyondTheOldEndIsBuiltOnceTheSharedExtentGrew) {
  const nvme::NamespaceTarget target = Target();  // 64 MiB at 1 MiB into the namespace
  auto size_blocks = std::make_shared<std::atomic<uint64_t>>(target.size_blocks);
  NvmeBackend backend(-1, target, 1, 512 * 1024, nullptr, size_blocks);
  ASSERT_TRUE(backend.Attach(*ring_, kFileIndex, done_.completer()).ok());
  BlockIo io;
  io.op = abi::kIoOpWrite;
  io.buffer = buffer_.data();
  io.offset = 64 << 20;
  io.length = 4096;
  backend.Submit(0, io);
  EXPECT_EQ(done_.Take(0), -EINVAL);
  EXPECT_TRUE(Queued().empty());

  size_blocks->store((uint64_t{128} << 20) >> target.lba_shift);  // what NvmeStorage::Grow does
  backend.Submit(0, io);
  std::vector<const io_uring_sqe*> sqes = Queued();
  ASSERT_EQ(sqes.size(), 1u);
  EXPECT_EQ(CmdOf(sqes[0]).cdw10, 2048u + ((64u << 20) >> 9));
  backend.OnCompletion(0, Cqe(0));
  EXPECT_EQ(done_.Take(0), 4096);
  io.offset = 128 << 20;  // the new end still holds
  backend.Submit(0, io);
  EXPECT_EQ(done_.Take(0), -EINVAL);
}

TEST(NvmeStorage, RefusesPathsThatAreNotAGenericCharDeviceNamingThePath) {
  DeviceConfig config;
  config.size_bytes = 1 << 20;
  for (const char* path : {"/nonexistent/ng0n1", "/etc/hostname", "relative/ng0n1"}) {
    absl::StatusOr<std::unique_ptr<NvmeStorage>> storage =
        NvmeStorage::Open(NvmeBackendConfig{path, 0, nullptr}, config);
    ASSERT_FALSE(storage.ok()) << path;
    EXPECT_EQ(storage.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_NE(storage.status().message().find(path), absl::string_view::npos)
        << storage.status().message();
  }
  // A char device that is no NVMe namespace: the Identify path says so.
  absl::StatusOr<std::unique_ptr<NvmeStorage>> null_dev =
      NvmeStorage::Open(NvmeBackendConfig{"/dev/null", 0, nullptr}, config);
  ASSERT_FALSE(null_dev.ok());
  EXPECT_NE(null_dev.status().message().find("not an NVMe namespace"), absl::string_view::npos)
      << null_dev.status().message();
}

// Path failover: a fabric namespace's multipath head fails commands whose path went away; they
// are resubmitted unchanged after the retry timer, and fail only past the failover bound.
class NvmeFailoverTest : public NvmeBackendTest {
 protected:
  void Make(uint32_t failover_ms) {
    stats_ = std::make_shared<NvmeStats>();
    backend_ = std::make_unique<NvmeBackend>(/*fd=*/-1, Target(), 4, 512 * 1024, stats_, nullptr,
                                             failover_ms);
    ASSERT_TRUE(backend_->Attach(*ring_, kFileIndex, done_.completer()).ok());
  }
  const io_uring_sqe* SubmitRead(uint16_t tag) {
    BlockIo io;
    io.op = abi::kIoOpRead;
    io.offset = 4096;
    io.length = 4096;
    io.buffer = buffer_.data();
    backend_->Submit(tag, io);
    std::vector<const io_uring_sqe*> sqes = Queued();
    EXPECT_EQ(sqes.size(), 1u);
    return sqes.empty() ? nullptr : sqes[0];
  }
  static io_uring_cqe CqeFor(const io_uring_sqe* sqe, int32_t res) {
    io_uring_cqe cqe{};
    cqe.user_data = sqe->user_data;
    cqe.res = res;
    return cqe;
  }
  // Ends the turn and fires the retry timer it armed.
  void FireRetryTimer() {
    backend_->EndOfTurn();
    std::vector<const io_uring_sqe*> sqes = Queued();
    ASSERT_EQ(sqes.size(), 1u);
    ASSERT_EQ(sqes[0]->opcode, IORING_OP_TIMEOUT);
    backend_->OnCompletion(TagOf(sqes[0]->user_data), CqeFor(sqes[0], -ETIME));
  }

  std::shared_ptr<NvmeStats> stats_;
  static constexpr int32_t kHostAborted = (nvme::kSctPathRelated << 8) | 0x71;
};

TEST_F(NvmeFailoverTest, APathFailureIsResubmittedUnchangedAndTheRequestSucceeds) {
  Make(30000);
  const io_uring_sqe* first = SubmitRead(2);
  const nvme::UringCmd command = CmdOf(first);
  backend_->OnCompletion(2, CqeFor(first, kHostAborted));
  EXPECT_EQ(done_.untaken(), 0u);
  FireRetryTimer();
  std::vector<const io_uring_sqe*> again = Queued();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(
      std::memcmp(&command, reinterpret_cast<const unsigned char*>(again[0]) + 48, sizeof(command)),
      0);
  EXPECT_EQ(stats_->failovers.load(), 1u);
  // All paths down for a while: the head refuses with EINVAL, the command waits on.
  backend_->OnCompletion(2, CqeFor(again[0], -EINVAL));
  FireRetryTimer();
  again = Queued();
  ASSERT_EQ(again.size(), 1u);
  backend_->OnCompletion(2, CqeFor(again[0], 0));
  EXPECT_EQ(done_.Take(2), 4096);
  EXPECT_EQ(stats_->failovers.load(), 2u);
  EXPECT_EQ(stats_->failover_timeouts.load(), 0u);
  EXPECT_EQ(stats_->gone_errors.load(), 0u);
}

TEST_F(NvmeFailoverTest, NoPathWithinTheBoundFailsTheRequestWithEio) {
  Make(1);
  const io_uring_sqe* first = SubmitRead(1);
  backend_->OnCompletion(1, CqeFor(first, -EINVAL));
  EXPECT_EQ(done_.untaken(), 0u);
  // Time passing, not synchronisation: the bound is 1 ms from the first failure.
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  FireRetryTimer();
  EXPECT_EQ(done_.Take(1), -EIO);
  EXPECT_TRUE(Queued().empty());
  EXPECT_EQ(stats_->failover_timeouts.load(), 1u);
}

TEST_F(NvmeFailoverTest, AMediaErrorFailsAtOnceWithItsErrno) {
  Make(30000);
  const io_uring_sqe* first = SubmitRead(0);
  backend_->OnCompletion(
      0, CqeFor(first, (nvme::kSctMediaError << 8) | nvme::kScUnrecoveredReadError));
  EXPECT_EQ(done_.Take(0), -ENODATA);
  backend_->EndOfTurn();
  EXPECT_TRUE(Queued().empty());  // no retry timer
}

TEST_F(NvmeFailoverTest, WithoutFailoverAPathFailureFailsAtOnceAsAGoneNamespace) {
  Make(0);
  const io_uring_sqe* first = SubmitRead(3);
  backend_->OnCompletion(3, CqeFor(first, kHostAborted));
  EXPECT_EQ(done_.Take(3), -EIO);
  EXPECT_EQ(stats_->gone_errors.load(), 1u);
}

}  // namespace
}  // namespace blk::server
