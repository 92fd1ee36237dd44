#include "server/nvme/abi.h"

#include <cstddef>

#include "gtest/gtest.h"

#if __has_include(<linux/nvme_ioctl.h>)
#include <linux/nvme_ioctl.h>
#define BLK_HAVE_SYSTEM_NVME_HEADER 1
#endif

namespace blk::server::nvme {
namespace {

TEST(NvmeAbi, CommandLayoutsHaveTheKernelOffsets) {
  EXPECT_EQ(sizeof(UringCmd), 72u);
  EXPECT_EQ(offsetof(UringCmd, nsid), 4u);
  EXPECT_EQ(offsetof(UringCmd, metadata), 16u);
  EXPECT_EQ(offsetof(UringCmd, addr), 24u);
  EXPECT_EQ(offsetof(UringCmd, data_len), 36u);
  EXPECT_EQ(offsetof(UringCmd, cdw10), 40u);
  EXPECT_EQ(offsetof(UringCmd, cdw15), 60u);
  EXPECT_EQ(offsetof(UringCmd, timeout_ms), 64u);
  EXPECT_EQ(sizeof(PassthruCmd), 72u);
  EXPECT_EQ(offsetof(PassthruCmd, result), 68u);
  EXPECT_EQ(sizeof(DsmRange), 16u);
  EXPECT_EQ(offsetof(DsmRange, length_blocks), 4u);
  EXPECT_EQ(offsetof(DsmRange, starting_lba), 8u);
}

TEST(NvmeAbi, IoctlNumbersAreSpelledOut) {
  // _IOWR('N', nr, 72-byte struct) and _IO('N', 0x40).
  EXPECT_EQ(kIoctlId, 0x4e40u);
  EXPECT_EQ(kIoctlAdminCmd, 0xc0484e41u);
  EXPECT_EQ(kIoctlIoCmd, 0xc0484e43u);
  EXPECT_EQ(kUringCmdIo, 0xc0484e80u);
  EXPECT_EQ(kUringCmdAdmin, 0xc0484e82u);
}

#ifdef BLK_HAVE_SYSTEM_NVME_HEADER
TEST(NvmeAbi, MatchesTheSystemUapiHeader) {
  EXPECT_EQ(sizeof(UringCmd), sizeof(struct nvme_uring_cmd));
  EXPECT_EQ(offsetof(UringCmd, opcode), offsetof(struct nvme_uring_cmd, opcode));
  EXPECT_EQ(offsetof(UringCmd, flags), offsetof(struct nvme_uring_cmd, flags));
  EXPECT_EQ(offsetof(UringCmd, nsid), offsetof(struct nvme_uring_cmd, nsid));
  EXPECT_EQ(offsetof(UringCmd, cdw2), offsetof(struct nvme_uring_cmd, cdw2));
  EXPECT_EQ(offsetof(UringCmd, metadata), offsetof(struct nvme_uring_cmd, metadata));
  EXPECT_EQ(offsetof(UringCmd, addr), offsetof(struct nvme_uring_cmd, addr));
  EXPECT_EQ(offsetof(UringCmd, metadata_len), offsetof(struct nvme_uring_cmd, metadata_len));
  EXPECT_EQ(offsetof(UringCmd, data_len), offsetof(struct nvme_uring_cmd, data_len));
  EXPECT_EQ(offsetof(UringCmd, cdw10), offsetof(struct nvme_uring_cmd, cdw10));
  EXPECT_EQ(offsetof(UringCmd, cdw11), offsetof(struct nvme_uring_cmd, cdw11));
  EXPECT_EQ(offsetof(UringCmd, cdw12), offsetof(struct nvme_uring_cmd, cdw12));
  EXPECT_EQ(offsetof(UringCmd, cdw13), offsetof(struct nvme_uring_cmd, cdw13));
  EXPECT_EQ(offsetof(UringCmd, cdw14), offsetof(struct nvme_uring_cmd, cdw14));
  EXPECT_EQ(offsetof(UringCmd, cdw15), offsetof(struct nvme_uring_cmd, cdw15));
  EXPECT_EQ(offsetof(UringCmd, timeout_ms), offsetof(struct nvme_uring_cmd, timeout_ms));

  EXPECT_EQ(sizeof(PassthruCmd), sizeof(struct nvme_passthru_cmd));
  EXPECT_EQ(offsetof(PassthruCmd, nsid), offsetof(struct nvme_passthru_cmd, nsid));
  EXPECT_EQ(offsetof(PassthruCmd, addr), offsetof(struct nvme_passthru_cmd, addr));
  EXPECT_EQ(offsetof(PassthruCmd, data_len), offsetof(struct nvme_passthru_cmd, data_len));
  EXPECT_EQ(offsetof(PassthruCmd, cdw10), offsetof(struct nvme_passthru_cmd, cdw10));
  EXPECT_EQ(offsetof(PassthruCmd, result), offsetof(struct nvme_passthru_cmd, result));

  EXPECT_EQ(kIoctlId, static_cast<uint32_t>(NVME_IOCTL_ID));
  EXPECT_EQ(kIoctlAdminCmd, static_cast<uint32_t>(NVME_IOCTL_ADMIN_CMD));
  EXPECT_EQ(kIoctlIoCmd, static_cast<uint32_t>(NVME_IOCTL_IO_CMD));
  EXPECT_EQ(kUringCmdIo, static_cast<uint32_t>(NVME_URING_CMD_IO));
  EXPECT_EQ(kUringCmdIoVec, static_cast<uint32_t>(NVME_URING_CMD_IO_VEC));
  EXPECT_EQ(kUringCmdAdmin, static_cast<uint32_t>(NVME_URING_CMD_ADMIN));
  EXPECT_EQ(kUringCmdAdminVec, static_cast<uint32_t>(NVME_URING_CMD_ADMIN_VEC));
}
#endif

}  // namespace
}  // namespace blk::server::nvme
