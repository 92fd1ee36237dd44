// SQE preparation for IORING_OP_URING_CMD, which liburing 2.3 has no helper for.
#pragma once

#include <liburing.h>

#include <cstdint>
#include <cstring>

#include "server/ublk/abi.h"

namespace blk::server {

// The command payload starts at byte 48 of the SQE: 16 bytes in a 64-byte SQE, 80 bytes in a
// 128-byte one (IORING_SETUP_SQE128).
inline constexpr size_t kSqeCmdOffset = 48;
inline constexpr size_t kSqe128CmdBytes = 80;

inline void* SqeCmdArea(io_uring_sqe* sqe) {
  return reinterpret_cast<unsigned char*>(sqe) + kSqeCmdOffset;
}

// A control command for /dev/ublk-control; the ring must use 128-byte SQEs.
inline void PrepUblkCtrlCmd(io_uring_sqe* sqe, int control_fd, uint32_t cmd_op,
                            const abi::CtrlCmd& cmd) {
  std::memset(sqe, 0, 2 * sizeof(io_uring_sqe));
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = control_fd;
  sqe->cmd_op = cmd_op;
  std::memcpy(SqeCmdArea(sqe), &cmd, sizeof(cmd));
}

// An I/O command (FETCH_REQ, COMMIT_AND_FETCH_REQ) for /dev/ublkcN; fits a 64-byte SQE (the second
// half of a 128-byte one is not read). `fd` is an index into the ring's registered files when
// `fixed_file` is set. `sqe_addr`: abi::AutoBufRegSqeAddr for zero-copy devices, else 0.
inline void PrepUblkIoCmd(io_uring_sqe* sqe, int fd, bool fixed_file, uint32_t cmd_op,
                          const abi::IoCmd& cmd, uint64_t user_data, uint64_t sqe_addr = 0) {
  std::memset(sqe, 0, sizeof(io_uring_sqe));
  sqe->addr = sqe_addr;
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  if (fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
  sqe->cmd_op = cmd_op;
  std::memcpy(SqeCmdArea(sqe), &cmd, sizeof(cmd));
  sqe->user_data = user_data;
}

}  // namespace blk::server
