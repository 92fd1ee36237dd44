#include "server/nvme/backend.h"

#include <cerrno>
#include <span>
#include <utility>

#include "server/nvme/sqe.h"
#include "server/ublk/abi.h"

namespace blk::server {

NvmeBackend::NvmeBackend(int fd, const nvme::NamespaceTarget& target, uint16_t queue_depth,
                         uint32_t max_request_bytes, std::shared_ptr<NvmeStats> stats,
                         std::shared_ptr<const std::atomic<uint64_t>> size_blocks)
    : fd_(fd),
      target_(target),
      commands_per_tag_(nvme::MaxCommandsPerRequest(target, max_request_bytes)),
      tags_(queue_depth),
      commands_(size_t{queue_depth} * commands_per_tag_),
      unissued_(queue_depth),
      stats_(std::move(stats)),
      size_blocks_(std::move(size_blocks)) {}

absl::Status NvmeBackend::Attach(Ring& ring, int first_file, Completer completer) {
  constexpr unsigned kBig = IORING_SETUP_SQE128 | IORING_SETUP_CQE32;
  if ((ring.setup_flags() & kBig) != kBig) {
    return absl::InternalError("NVMe passthrough needs a ring with 128-byte SQEs and 32-byte CQEs");
  }
  ring_ = &ring;
  file_index_ = first_file;
  completer_ = completer;
  return absl::OkStatus();
}

void NvmeBackend::Submit(uint16_t tag, const BlockIo& io) {
  if (tag >= tags_.size()) return completer_.Complete(tag, -EINVAL);
  TagState& state = tags_[tag];
  const bool registered = io.buffer_index >= 0;
  nvme::BlockRequest request;
  request.op = io.op;
  request.offset_bytes = io.offset;
  request.length_bytes = io.length;
  request.fua = (io.flags & abi::kIoFFua) != 0;
  // The request's own pages (zero copy) are addressed from 0; our buffers by their address.
  request.buffer = reinterpret_cast<uintptr_t>(io.buffer);
  std::span<nvme::UringCmd> commands(commands_.data() + size_t{tag} * commands_per_tag_,
                                     commands_per_tag_);
  // A plain load on x86 (acquire pairs with Grow's release): no request beyond the old end comes
  // before Grow raised it, since the kernel grows the device only after.
  if (size_blocks_ != nullptr) target_.size_blocks = size_blocks_->load(std::memory_order_acquire);
  const int count = nvme::BuildCommands(target_, request, commands, &state.dsm);
  if (count < 0) return completer_.Complete(tag, count);
  const int32_t result = io.op == abi::kIoOpFlush ? 0 : static_cast<int32_t>(io.length);
  if (count == 0) return completer_.Complete(tag, result);

  const bool carries_data = io.op == abi::kIoOpRead || io.op == abi::kIoOpWrite;
  nvme::SqeBuffer buffer;
  if (registered && carries_data) {
    buffer.fixed = true;
    buffer.index = static_cast<uint16_t>(io.buffer_index);
  }
  state.pending = 0;
  state.issued = 0;
  state.count = static_cast<uint32_t>(count);
  state.error = 0;
  state.result = result;
  state.buffer = buffer;
  if (!Issue(tag)) unissued_.Add(tag);
}

void NvmeBackend::EndOfTurn() {
  unissued_.RetryEach([this](uint32_t tag) { return Issue(static_cast<uint16_t>(tag)); });
}

bool NvmeBackend::Issue(uint16_t tag) {
  TagState& state = tags_[tag];
  const nvme::UringCmd* commands = commands_.data() + size_t{tag} * commands_per_tag_;
  for (; state.issued < state.count; ++state.issued) {
    io_uring_sqe* sqe = ring_->GetSqe();
    if (sqe == nullptr) return false;
    nvme::PrepNvmeIoCmd(sqe, file_index_, /*fixed_file=*/true, commands[state.issued], state.buffer,
                        EncodeUserData(CqeKind::kBackend, tag));
    ++state.pending;
  }
  return true;
}

void NvmeBackend::OnCompletion(uint16_t tag, const io_uring_cqe& cqe) {
  if (tag >= tags_.size()) return;
  TagState& state = tags_[tag];
  int error = nvme::ErrnoFromCompletion(cqe.res);
  if (error != 0 && nvme::NamespaceGone(cqe.res)) {
    error = EIO;
    if (stats_) {
      stats_->gone_result.store(cqe.res, std::memory_order_relaxed);
      stats_->gone_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (error != 0 && state.error == 0) state.error = error;
  // Commands still waiting for an SQE complete the request later.
  if (--state.pending > 0 || state.issued < state.count) return;
  completer_.Complete(tag, state.error != 0 ? -state.error : state.result);
}

}  // namespace blk::server
