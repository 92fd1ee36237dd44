#include "server/ublk/batch_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <liburing.h>

#include <cstring>
#include <vector>

#include "server/ublk/abi.h"
#include "server/ublk/uring_cmd.h"

namespace blk::server {
namespace {

using ::testing::HasSubstr;

uint64_t U64At(const uint8_t* at) {
  uint64_t value;
  std::memcpy(&value, at, sizeof(value));
  return value;
}

abi::BatchIo CmdOf(const io_uring_sqe& sqe) {
  abi::BatchIo cmd;
  std::memcpy(&cmd, reinterpret_cast<const uint8_t*>(&sqe) + kSqeCmdOffset, sizeof(cmd));
  return cmd;
}

TEST(BatchElemFormat, CopyModeCarriesTheBufferAddressInSixteenBytes) {
  const BatchElemFormat copy = BatchElemFormatFor(/*auto_buf_reg=*/false);
  EXPECT_EQ(copy.flags, abi::kBatchFHasBufAddr);
  EXPECT_EQ(copy.elem_bytes, 16);
}

TEST(BatchElemFormat, ZeroCopyIsTheEightByteHeaderAlone) {
  const BatchElemFormat zero_copy = BatchElemFormatFor(/*auto_buf_reg=*/true);
  EXPECT_EQ(zero_copy.flags, 0);
  EXPECT_EQ(zero_copy.elem_bytes, 8);
}

TEST(EncodeBatchElem, LaysOutTagBufIndexResultThenTheBufferAddress) {
  uint8_t elem[16];
  std::memset(elem, 0xaa, sizeof(elem));
  char buffer[8];
  EncodeBatchElem(elem, BatchElemFormatFor(false), /*tag=*/0x1234, /*result=*/-5, buffer);
  // struct ublk_elem_header: u16 tag, u16 buf_index, s32 result; then u64 buf_addr.
  EXPECT_EQ(elem[0], 0x34);
  EXPECT_EQ(elem[1], 0x12);
  const abi::ElemHeader header = DecodeBatchElemHeader(elem);
  EXPECT_EQ(header.tag, 0x1234);
  EXPECT_EQ(header.buf_index, 0x1234);  // the ring's buffer table is indexed by tag
  EXPECT_EQ(header.result, -5);
  EXPECT_EQ(U64At(elem + 8), reinterpret_cast<uint64_t>(buffer));
}

TEST(EncodeBatchElem, ZeroCopyWritesNothingPastTheHeader) {
  uint8_t elem[16];
  std::memset(elem, 0xaa, sizeof(elem));
  EncodeBatchElem(elem, BatchElemFormatFor(true), 7, 4096, nullptr);
  EXPECT_EQ(DecodeBatchElemHeader(elem).result, 4096);
  for (int i = 8; i < 16; ++i) EXPECT_EQ(elem[i], 0xaa) << "byte " << i;
}

TEST(CommittedElems, CountsWholeElementsAndRefusesNonsense) {
  const BatchElemFormat copy = BatchElemFormatFor(false);
  EXPECT_EQ(*CommittedElems(48, copy, 3), 3u);
  EXPECT_EQ(*CommittedElems(16, copy, 3), 1u);
  EXPECT_FALSE(CommittedElems(20, copy, 3).ok());  // not a whole element
  EXPECT_FALSE(CommittedElems(64, copy, 3).ok());  // more than was queued
  const absl::StatusOr<uint32_t> refused = CommittedElems(-22, copy, 3);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("COMMIT_IO_CMDS of 3 results"));
}

TEST(BatchCommits, PrepareNamesEveryTagWithItsBuffer) {
  std::vector<char> buffers(4 * 4096);
  BatchCommits commits(/*queue=*/3, /*depth=*/4, /*auto_buf_reg=*/false, buffers.data(), 4096);
  io_uring_sqe sqe;
  commits.PrepPrepare(&sqe, /*file_index=*/0, /*user_data=*/99);
  EXPECT_EQ(sqe.opcode, IORING_OP_URING_CMD);
  EXPECT_EQ(sqe.cmd_op, abi::kUIoPrepIoCmds);
  EXPECT_EQ(sqe.flags & IOSQE_FIXED_FILE, IOSQE_FIXED_FILE);
  EXPECT_EQ(sqe.len, 4u * 16);
  EXPECT_EQ(sqe.user_data, 99u);
  const abi::BatchIo cmd = CmdOf(sqe);
  EXPECT_EQ(cmd.q_id, 3);
  EXPECT_EQ(cmd.nr_elem, 4);
  EXPECT_EQ(cmd.elem_bytes, 16);
  EXPECT_EQ(cmd.flags, abi::kBatchFHasBufAddr);
  const uint8_t* elems = reinterpret_cast<const uint8_t*>(sqe.addr);
  for (uint16_t tag = 0; tag < 4; ++tag) {
    EXPECT_EQ(DecodeBatchElemHeader(elems + tag * 16).tag, tag);
    EXPECT_EQ(DecodeBatchElemHeader(elems + tag * 16).result, 0);
    EXPECT_EQ(U64At(elems + tag * 16 + 8), reinterpret_cast<uint64_t>(buffers.data() + tag * 4096));
  }
}

TEST(BatchCommits, OneCommitCarriesTheTurnsResultsAndTheNextFillsTheOtherBuffer) {
  BatchCommits commits(0, 8, /*auto_buf_reg=*/true, nullptr, 0);
  EXPECT_FALSE(commits.ReadyToCommit());  // nothing to commit
  commits.Add(5, 4096);
  commits.Add(2, -5);
  ASSERT_TRUE(commits.ReadyToCommit());
  io_uring_sqe first;
  commits.PrepCommit(&first, 0, /*user_data=*/0x100);
  EXPECT_EQ(first.cmd_op, abi::kUIoCommitIoCmds);
  EXPECT_EQ(CmdOf(first).nr_elem, 2);
  EXPECT_EQ(CmdOf(first).elem_bytes, 8);
  EXPECT_EQ(first.len, 16u);
  const uint8_t* elems = reinterpret_cast<const uint8_t*>(first.addr);
  EXPECT_EQ(DecodeBatchElemHeader(elems).tag, 5);
  EXPECT_EQ(DecodeBatchElemHeader(elems).result, 4096);
  EXPECT_EQ(DecodeBatchElemHeader(elems + 8).tag, 2);
  EXPECT_EQ(DecodeBatchElemHeader(elems + 8).result, -5);
  EXPECT_EQ(commits.pending(), 0u);

  // The next turn fills the other buffer. Its commit waits for the first's CQE: after it, the
  // turn after would fill the first buffer, which the kernel may not have read before that CQE.
  commits.Add(5, 512);
  EXPECT_FALSE(commits.ReadyToCommit());
  ASSERT_TRUE(commits.OnCommitted(static_cast<uint8_t>(first.user_data & 0xff), 16).ok());
  ASSERT_TRUE(commits.ReadyToCommit());
  io_uring_sqe second;
  commits.PrepCommit(&second, 0, 0x100);
  EXPECT_NE(second.addr, first.addr);
  EXPECT_EQ(CmdOf(second).nr_elem, 1);
  EXPECT_EQ(DecodeBatchElemHeader(reinterpret_cast<const uint8_t*>(second.addr)).result, 512);

  // The queue's last commit goes without waiting (nothing is added after it).
  commits.Add(1, 0);
  EXPECT_FALSE(commits.ReadyToCommit());
  io_uring_sqe last;
  commits.PrepCommit(&last, 0, 0x100, /*force=*/true);
  EXPECT_EQ(last.addr, first.addr);
  EXPECT_EQ(DecodeBatchElemHeader(reinterpret_cast<const uint8_t*>(last.addr)).tag, 1);
}

TEST(BatchCommits, APartialCommitNamesTheTagTheKernelRefused) {
  BatchCommits commits(0, 8, /*auto_buf_reg=*/true, nullptr, 0);
  commits.Add(3, 0);
  commits.Add(6, 0);
  io_uring_sqe sqe;
  commits.PrepCommit(&sqe, 0, 0);
  const absl::Status partial = commits.OnCommitted(static_cast<uint8_t>(sqe.user_data), 8);
  ASSERT_FALSE(partial.ok());
  EXPECT_THAT(partial.message(), HasSubstr("took 1 of 2"));
  EXPECT_THAT(partial.message(), HasSubstr("tag 6"));
}

TEST(PrepUblkBatchFetch, IsAMultishotCommandSelectingFromTheQueuesBufferGroup) {
  io_uring_sqe sqe;
  PrepUblkBatchFetch(&sqe, 0, /*queue=*/2, /*buffer_group=*/5, 77);
  EXPECT_EQ(sqe.cmd_op, abi::kUIoFetchIoCmds);
  EXPECT_EQ(sqe.uring_cmd_flags, kUringCmdMultishot);
  EXPECT_EQ(sqe.flags, IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT);
  EXPECT_EQ(sqe.buf_group, 5);
  const abi::BatchIo cmd = CmdOf(sqe);
  EXPECT_EQ(cmd.q_id, 2);
  EXPECT_EQ(cmd.elem_bytes, 2);  // u16 tags
  EXPECT_EQ(cmd.flags, 0);       // the kernel refuses any flag on FETCH
}

}  // namespace
}  // namespace blk::server
