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
// sqe->uring_cmd_flags: the command posts CQEs (IORING_CQE_F_MORE) until it ends (Linux 6.18+,
// IORING_URING_CMD_MULTISHOT; liburing 2.3 does not name it).
inline constexpr uint32_t kUringCmdMultishot = 1U << 1;

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

// A UBLK_F_BATCH_IO command for /dev/ublkcN (registered file `file_index`): PREP_IO_CMDS or
// COMMIT_IO_CMDS with `cmd.nr_elem` elements at `elements`.
inline void PrepUblkBatchCmd(io_uring_sqe* sqe, int file_index, uint32_t cmd_op,
                             const abi::BatchIo& cmd, const void* elements, uint64_t user_data) {
  std::memset(sqe, 0, sizeof(io_uring_sqe));
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = file_index;
  sqe->flags = IOSQE_FIXED_FILE;
  sqe->cmd_op = cmd_op;
  sqe->addr = reinterpret_cast<uint64_t>(elements);
  sqe->len = uint32_t{cmd.nr_elem} * cmd.elem_bytes;
  std::memcpy(SqeCmdArea(sqe), &cmd, sizeof(cmd));
  sqe->user_data = user_data;
}

// The multishot FETCH_IO_CMDS of `queue`: each CQE delivers u16 tags in a buffer taken from the
// provided buffer ring `buffer_group`.
inline void PrepUblkBatchFetch(io_uring_sqe* sqe, int file_index, uint16_t queue,
                               uint16_t buffer_group, uint64_t user_data) {
  std::memset(sqe, 0, sizeof(io_uring_sqe));
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = file_index;
  sqe->flags = IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
  sqe->cmd_op = abi::kUIoFetchIoCmds;
  sqe->uring_cmd_flags = kUringCmdMultishot;
  sqe->buf_group = buffer_group;
  abi::BatchIo cmd{};
  cmd.q_id = queue;
  cmd.elem_bytes = sizeof(uint16_t);
  std::memcpy(SqeCmdArea(sqe), &cmd, sizeof(cmd));
  sqe->user_data = user_data;
}

}  // namespace blk::server
