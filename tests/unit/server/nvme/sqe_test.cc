#include "server/nvme/sqe.h"

#include <array>
#include <cstring>

#include "gtest/gtest.h"

namespace blk::server::nvme {
namespace {

TEST(NvmeSqe, IoCommandFillsAn128ByteSqeWithThePayloadAtByte48) {
  std::array<io_uring_sqe, 2> sqe128;
  std::memset(sqe128.data(), 0xa5, sizeof(sqe128));
  UringCmd cmd{};
  cmd.opcode = kOpWrite;
  cmd.nsid = 3;
  cmd.addr = 0x1000;
  cmd.data_len = 4096;
  cmd.cdw10 = 7;
  cmd.cdw12 = kCdw12Fua | 7;
  PrepNvmeIoCmd(&sqe128[0], 5, /*fixed_file=*/true, cmd, SqeBuffer{}, 42);

  EXPECT_EQ(sqe128[0].opcode, IORING_OP_URING_CMD);
  EXPECT_EQ(sqe128[0].fd, 5);
  EXPECT_EQ(sqe128[0].flags, IOSQE_FIXED_FILE);
  EXPECT_EQ(sqe128[0].cmd_op, kUringCmdIo);
  EXPECT_EQ(sqe128[0].uring_cmd_flags, 0u);
  EXPECT_EQ(sqe128[0].user_data, 42u);
  UringCmd stored;
  std::memcpy(&stored, reinterpret_cast<const unsigned char*>(sqe128.data()) + 48, sizeof(stored));
  EXPECT_EQ(std::memcmp(&stored, &cmd, sizeof(cmd)), 0);
  // The 8 bytes after the 72-byte payload are cleared, not left over from a previous use.
  const unsigned char* tail = reinterpret_cast<const unsigned char*>(sqe128.data()) + 48 + 72;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(tail[i], 0) << i;
}

TEST(NvmeSqe, RegisteredBufferSetsTheFixedFlagAndIndex) {
  std::array<io_uring_sqe, 2> sqe128{};
  PrepNvmeIoCmd(&sqe128[0], 0, false, UringCmd{}, SqeBuffer{true, 17}, 1);
  EXPECT_EQ(sqe128[0].uring_cmd_flags, IORING_URING_CMD_FIXED);
  EXPECT_EQ(sqe128[0].buf_index, 17u);
  EXPECT_EQ(sqe128[0].flags, 0u);
}

}  // namespace
}  // namespace blk::server::nvme
