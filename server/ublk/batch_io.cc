#include "server/ublk/batch_io.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/ublk/uring_cmd.h"

namespace blk::server {
namespace {

// The kernel copies at most 128 tags into one fetch buffer (MAX_NR_TAG in ublk_drv.c); a bigger
// buffer would only waste memory.
constexpr uint32_t kMaxTagsPerFetchCqe = 128;

}  // namespace

BatchElemFormat BatchElemFormatFor(bool auto_buf_reg) {
  BatchElemFormat format;
  if (!auto_buf_reg) {
    format.flags = abi::kBatchFHasBufAddr;
    format.elem_bytes = sizeof(abi::ElemHeader) + sizeof(uint64_t);
  }
  return format;
}

void EncodeBatchElem(uint8_t* at, const BatchElemFormat& format, uint16_t tag, int32_t result,
                     const void* buffer) {
  const abi::ElemHeader header{tag, tag, result};
  std::memcpy(at, &header, sizeof(header));
  if (format.flags & abi::kBatchFHasBufAddr) {
    const uint64_t address = reinterpret_cast<uint64_t>(buffer);
    std::memcpy(at + sizeof(header), &address, sizeof(address));
  }
}

abi::ElemHeader DecodeBatchElemHeader(const uint8_t* at) {
  abi::ElemHeader header;
  std::memcpy(&header, at, sizeof(header));
  return header;
}

absl::StatusOr<uint32_t> CommittedElems(int32_t res, const BatchElemFormat& format,
                                        uint32_t queued) {
  if (res < 0) {
    return absl::ErrnoToStatus(-res, absl::StrCat("COMMIT_IO_CMDS of ", queued, " results"));
  }
  const uint32_t done = static_cast<uint32_t>(res) / format.elem_bytes;
  if (static_cast<uint32_t>(res) % format.elem_bytes != 0 || done > queued) {
    return absl::InternalError(absl::StrCat("COMMIT_IO_CMDS of ", queued, " results of ",
                                            unsigned{format.elem_bytes}, " bytes each answered ",
                                            res, " bytes"));
  }
  return done;
}

BatchCommits::BatchCommits(uint16_t queue, uint16_t depth, bool auto_buf_reg, const char* buffers,
                           uint32_t stride)
    : queue_(queue),
      depth_(depth),
      format_(BatchElemFormatFor(auto_buf_reg)),
      buffers_(auto_buf_reg ? nullptr : buffers),
      stride_(stride),
      storage_(new uint8_t[2 * size_t{depth} * format_.elem_bytes]()) {
  fill_ = storage_.get();
}

void BatchCommits::PrepPrepare(io_uring_sqe* sqe, int file_index, uint64_t user_data) {
  for (uint16_t tag = 0; tag < depth_; ++tag) {
    EncodeBatchElem(fill_ + size_t{tag} * format_.elem_bytes, format_, tag, 0, BufferOf(tag));
  }
  abi::BatchIo cmd{};
  cmd.q_id = queue_;
  cmd.flags = format_.flags;
  cmd.nr_elem = depth_;
  cmd.elem_bytes = format_.elem_bytes;
  PrepUblkBatchCmd(sqe, file_index, abi::kUIoPrepIoCmds, cmd, fill_, user_data);
}

void BatchCommits::PrepCommit(io_uring_sqe* sqe, int file_index, uint64_t user_data, bool force) {
  if (filled_ == 0 || (!force && in_flight_[1 - filling_])) return;
  abi::BatchIo cmd{};
  cmd.q_id = queue_;
  cmd.flags = format_.flags;
  cmd.nr_elem = static_cast<uint16_t>(filled_);
  cmd.elem_bytes = format_.elem_bytes;
  PrepUblkBatchCmd(sqe, file_index, abi::kUIoCommitIoCmds, cmd, fill_, user_data | filling_);
  in_flight_[filling_] = true;
  queued_[filling_] = filled_;
  filling_ = 1 - filling_;
  fill_ = storage_.get() + size_t{filling_} * depth_ * format_.elem_bytes;
  filled_ = 0;
}

absl::Status BatchCommits::OnCommitted(uint8_t which, int32_t res) {
  which &= 1;
  in_flight_[which] = false;
  absl::StatusOr<uint32_t> done = CommittedElems(res, format_, queued_[which]);
  if (!done.ok()) return done.status();
  if (*done == queued_[which]) return absl::OkStatus();
  const uint8_t* first = storage_.get() + (size_t{which} * depth_ + *done) * format_.elem_bytes;
  return absl::InternalError(absl::StrCat("COMMIT_IO_CMDS took ", *done, " of ", queued_[which],
                                          " results; the kernel refused tag ",
                                          DecodeBatchElemHeader(first).tag));
}

absl::StatusOr<std::unique_ptr<TagBufferRing>> TagBufferRing::Register(io_uring* ring,
                                                                       uint16_t group,
                                                                       uint16_t depth) {
  std::unique_ptr<TagBufferRing> tags(new TagBufferRing());
  tags->group_ = group;
  tags->entries_ = std::bit_ceil(2u * depth);
  tags->buffer_bytes_ =
      static_cast<uint32_t>(sizeof(uint16_t) * std::min<uint32_t>(depth, kMaxTagsPerFetchCqe));

  const size_t ring_bytes = size_t{tags->entries_} * sizeof(io_uring_buf);
  void* memory =
      ::mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return absl::ErrnoToStatus(errno, "mmap of the fetch buffer ring");
  tags->ring_memory_ = Mapping(memory, ring_bytes);
  const size_t buffer_bytes = size_t{tags->entries_} * tags->buffer_bytes_;
  memory =
      ::mmap(nullptr, buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return absl::ErrnoToStatus(errno, "mmap of the fetch buffers");
  tags->buffers_ = Mapping(memory, buffer_bytes);

  tags->ring_ = static_cast<io_uring_buf_ring*>(tags->ring_memory_.address());
  io_uring_buf_ring_init(tags->ring_);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<uint64_t>(tags->ring_);
  reg.ring_entries = tags->entries_;
  reg.bgid = group;
  int rc = io_uring_register_buf_ring(ring, &reg, 0);
  if (rc < 0) return absl::ErrnoToStatus(-rc, "io_uring_register_buf_ring of the fetch buffers");
  const int mask = io_uring_buf_ring_mask(tags->entries_);
  for (uint32_t id = 0; id < tags->entries_; ++id) {
    io_uring_buf_ring_add(tags->ring_, tags->Buffer(static_cast<uint16_t>(id)), tags->buffer_bytes_,
                          static_cast<uint16_t>(id), mask, static_cast<int>(id));
  }
  io_uring_buf_ring_advance(tags->ring_, static_cast<int>(tags->entries_));
  return tags;
}

std::span<const uint16_t> TagBufferRing::TagsOf(const io_uring_cqe& cqe) const {
  if (cqe.res <= 0 || (cqe.flags & IORING_CQE_F_BUFFER) == 0) return {};
  const uint16_t id = static_cast<uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
  if (id >= entries_) return {};
  const uint32_t count =
      std::min<uint32_t>(static_cast<uint32_t>(cqe.res), buffer_bytes_) / sizeof(uint16_t);
  return {Buffer(id), count};
}

void TagBufferRing::Recycle(const io_uring_cqe& cqe) {
  if ((cqe.flags & IORING_CQE_F_BUFFER) == 0) return;
  const uint16_t id = static_cast<uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
  if (id >= entries_) return;
  io_uring_buf_ring_add(ring_, Buffer(id), buffer_bytes_, id, io_uring_buf_ring_mask(entries_), 0);
  io_uring_buf_ring_advance(ring_, 1);
}

}  // namespace blk::server
