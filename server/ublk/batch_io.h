// UBLK_F_BATCH_IO's plumbing for one queue (Linux 7.0+): the element encoding of PREP_IO_CMDS and
// COMMIT_IO_CMDS, the two preallocated commit buffers, and the provided buffer ring the multishot
// FETCH_IO_CMDS writes tags into. The queue's loop uses it instead of one FETCH_REQ /
// COMMIT_AND_FETCH_REQ per tag: one PREP at start, one FETCH for the queue's life, one COMMIT per
// loop turn carrying every result of that turn.
#pragma once

#include <liburing.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/mapping.h"
#include "server/ublk/abi.h"

namespace blk::server {

// How a device's PREP/COMMIT elements look: copy mode carries each tag's buffer address (the kernel
// copies between the request and that buffer), zero copy (AUTO_BUF_REG) only the header, whose
// buf_index says where the kernel registers the tag's next request's pages.
struct BatchElemFormat {
  uint16_t flags = 0;  // abi::kBatchF*
  uint8_t elem_bytes = sizeof(abi::ElemHeader);
};
BatchElemFormat BatchElemFormatFor(bool auto_buf_reg);

// Writes one element at `at` (format.elem_bytes bytes). buf_index is the tag (the ring's buffer
// table is indexed by tag); `buffer` is written only where the format carries an address.
void EncodeBatchElem(uint8_t* at, const BatchElemFormat& format, uint16_t tag, int32_t result,
                     const void* buffer);
// The header of the element at `at` (tests, diagnostics).
abi::ElemHeader DecodeBatchElemHeader(const uint8_t* at);

// How many elements a COMMIT_IO_CMDS handled, from its CQE's result (bytes handled, or -errno for
// "none"); an error names what the kernel refused.
absl::StatusOr<uint32_t> CommittedElems(int32_t res, const BatchElemFormat& format,
                                        uint32_t queued);

// The results of a queue's completed tags, gathered during a loop turn and committed in one
// COMMIT_IO_CMDS. Two buffers of `depth` elements, allocated once: one fills while the other's
// COMMIT is in flight (the kernel reads it when the SQE is issued; its CQE frees it).
class BatchCommits {
 public:
  // `buffers`: the queue's per-tag buffers, `stride` bytes apart (copy mode), or nullptr (zero
  // copy).
  BatchCommits(uint16_t queue, uint16_t depth, bool auto_buf_reg, const char* buffers,
               uint32_t stride);

  const BatchElemFormat& format() const { return format_; }

  // PREP_IO_CMDS for every tag of the queue (result 0), from the filling buffer; once at start,
  // before FETCH_IO_CMDS, and complete (its CQE seen) before any Add.
  void PrepPrepare(io_uring_sqe* sqe, int file_index, uint64_t user_data);

  // Queues tag's result for the next commit. Each tag is at most once in the filling buffer: the
  // kernel hands it out again only after it was committed.
  void Add(uint16_t tag, int32_t result) {
    EncodeBatchElem(fill_ + size_t{filled_} * format_.elem_bytes, format_, tag, result,
                    BufferOf(tag));
    ++filled_;
  }
  uint32_t pending() const { return filled_; }
  // Something to commit and a free buffer to switch to.
  bool ReadyToCommit() const { return filled_ > 0 && !in_flight_[1 - filling_]; }
  // COMMIT_IO_CMDS of the filling buffer, then fill the other one. user_data's low byte gets the
  // buffer's index, for OnCommitted. `force`: switch even if the other buffer's CQE was not seen
  // (only when nothing is added any more: the queue's last commit).
  void PrepCommit(io_uring_sqe* sqe, int file_index, uint64_t user_data, bool force = false);
  // The CQE of buffer `which`'s commit: frees it, and says what the kernel did not commit.
  absl::Status OnCommitted(uint8_t which, int32_t res);

 private:
  const void* BufferOf(uint16_t tag) const {
    return buffers_ == nullptr ? nullptr : buffers_ + size_t{tag} * stride_;
  }

  uint16_t queue_;
  uint16_t depth_;
  BatchElemFormat format_;
  const char* buffers_;
  uint32_t stride_;
  std::unique_ptr<uint8_t[]> storage_;  // both buffers, depth elements each
  uint8_t* fill_ = nullptr;             // the filling buffer
  uint8_t filling_ = 0;
  uint32_t filled_ = 0;
  uint32_t queued_[2] = {0, 0};  // elements in each buffer's COMMIT
  bool in_flight_[2] = {false, false};
};

// The provided buffer ring (group `group` of the queue's io_uring) FETCH_IO_CMDS takes a buffer
// from for each CQE and writes tags into. Enough buffers for every CQE the kernel can post before
// the loop hands them back (one per tag at worst, twice over), so the fetch does not run dry.
class TagBufferRing {
 public:
  static absl::StatusOr<std::unique_ptr<TagBufferRing>> Register(io_uring* ring, uint16_t group,
                                                                 uint16_t depth);
  // The kernel drops the registration when the io_uring closes; the memory goes with this object,
  // which must outlive the io_uring.
  ~TagBufferRing() = default;

  uint16_t group() const { return group_; }
  // The tags a FETCH_IO_CMDS CQE delivered (res bytes of the buffer its flags name).
  std::span<const uint16_t> TagsOf(const io_uring_cqe& cqe) const;
  // Hands the CQE's buffer back to the kernel (nothing when it carries none).
  void Recycle(const io_uring_cqe& cqe);

 private:
  TagBufferRing() = default;
  uint16_t* Buffer(uint16_t id) const {
    return reinterpret_cast<uint16_t*>(static_cast<char*>(buffers_.address()) +
                                       size_t{id} * buffer_bytes_);
  }

  uint16_t group_ = 0;
  uint32_t entries_ = 0;
  uint32_t buffer_bytes_ = 0;
  Mapping ring_memory_;  // struct io_uring_buf_ring, page aligned
  Mapping buffers_;
  io_uring_buf_ring* ring_ = nullptr;
};

}  // namespace blk::server
