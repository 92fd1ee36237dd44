// SQE preparation for NVMe I/O passthrough on /dev/ngXnY (IORING_OP_URING_CMD with
// NVME_URING_CMD_IO), in the style of server/ublk/uring_cmd.h. The ring must use 128-byte SQEs
// (IORING_SETUP_SQE128) and, to see CQE dword 0, 32-byte CQEs (IORING_SETUP_CQE32).
#pragma once

#include <liburing.h>

#include <cstdint>
#include <cstring>

#include "server/nvme/abi.h"
#include "server/ublk/uring_cmd.h"

namespace blk::server::nvme {

// Where the data of a Read/Write lives: a plain address, or an address inside registered buffer
// `index` (IORING_URING_CMD_FIXED: the kernel maps the command's addr/data_len within it).
struct SqeBuffer {
  bool fixed = false;
  uint16_t index = 0;
};

inline void PrepNvmeIoCmd(io_uring_sqe* sqe, int fd, bool fixed_file, const UringCmd& cmd,
                          SqeBuffer buffer, uint64_t user_data) {
  std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  if (fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
  sqe->cmd_op = kUringCmdIo;
  if (buffer.fixed) {
    sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
    sqe->buf_index = buffer.index;
  }
  std::memcpy(SqeCmdArea(sqe), &cmd, sizeof(cmd));
  sqe->user_data = user_data;
}

}  // namespace blk::server::nvme
