#include "server/nvme/backend.h"

#include <algorithm>
#include <cerrno>
#include <span>
#include <utility>

#include "common/monotonic_clock.h"
#include "server/nvme/sqe.h"
#include "server/ublk/abi.h"

namespace blk::server {
namespace {

// The retry timer's user_data extra; command completions carry the command's index there.
constexpr uint32_t kRetryTimerExtra = 0xffffffff;
// A failed-over command waits this long first (a lost path's commands often find the other path
// live at once); the wait doubles while retries keep failing (all paths down) up to the cap.
constexpr uint32_t kFirstRetryDelayMs = 10;
constexpr uint32_t kMaxRetryDelayMs = 200;

}  // namespace

NvmeBackend::NvmeBackend(int fd, const nvme::NamespaceTarget& target, uint16_t queue_depth,
                         uint32_t max_request_bytes, std::shared_ptr<NvmeStats> stats,
                         std::shared_ptr<const std::atomic<uint64_t>> size_blocks,
                         uint32_t path_failover_ms)
    : fd_(fd),
      target_(target),
      commands_per_tag_(nvme::MaxCommandsPerRequest(target, max_request_bytes)),
      tags_(queue_depth),
      commands_(size_t{queue_depth} * commands_per_tag_),
      unissued_(queue_depth),
      path_failover_ms_(path_failover_ms),
      parked_(path_failover_ms > 0 ? size_t{queue_depth} * commands_per_tag_ : 0),
      retry_delay_ms_(kFirstRetryDelayMs),
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
  state.parked = 0;
  state.failing_since_ns = 0;
  state.issued = 0;
  state.count = static_cast<uint32_t>(count);
  state.error = 0;
  state.result = result;
  state.buffer = buffer;
  if (!Issue(tag)) unissued_.Add(tag);
}

void NvmeBackend::EndOfTurn() {
  unissued_.RetryEach([this](uint32_t tag) { return Issue(static_cast<uint16_t>(tag)); });
  if (!parked_.empty() && !retry_timer_armed_) ArmRetryTimer();
}

bool NvmeBackend::Issue(uint16_t tag) {
  TagState& state = tags_[tag];
  const nvme::UringCmd* commands = commands_.data() + size_t{tag} * commands_per_tag_;
  for (; state.issued < state.count; ++state.issued) {
    io_uring_sqe* sqe = ring_->GetSqe();
    if (sqe == nullptr) return false;
    nvme::PrepNvmeIoCmd(sqe, file_index_, /*fixed_file=*/true, commands[state.issued], state.buffer,
                        EncodeUserData(CqeKind::kBackend, tag, state.issued));
    ++state.pending;
  }
  return true;
}

bool NvmeBackend::Reissue(uint16_t tag, uint32_t index) {
  TagState& state = tags_[tag];
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) return false;
  const nvme::UringCmd& command = commands_[size_t{tag} * commands_per_tag_ + index];
  nvme::PrepNvmeIoCmd(sqe, file_index_, /*fixed_file=*/true, command, state.buffer,
                      EncodeUserData(CqeKind::kBackend, tag, index));
  ++state.pending;
  --state.parked;
  if (stats_) stats_->failovers.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void NvmeBackend::Park(uint16_t tag, uint32_t index) {
  TagState& state = tags_[tag];
  const int64_t now = MonotonicNs();
  if (state.failing_since_ns == 0) state.failing_since_ns = now;
  if (now - state.failing_since_ns >= int64_t{path_failover_ms_} * 1000000) {
    if (state.error == 0) {
      state.error = EIO;
      if (stats_) stats_->failover_timeouts.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  ++state.parked;
  parked_.Add(static_cast<uint32_t>(tag) * commands_per_tag_ + index);
}

void NvmeBackend::ArmRetryTimer() {
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) return;  // the next turn arms it
  retry_timeout_.tv_sec = retry_delay_ms_ / 1000;
  retry_timeout_.tv_nsec = static_cast<long long>(retry_delay_ms_ % 1000) * 1000000;
  io_uring_prep_timeout(sqe, &retry_timeout_, 0, 0);
  sqe->user_data = EncodeUserData(CqeKind::kBackend, 0, kRetryTimerExtra);
  retry_timer_armed_ = true;
}

void NvmeBackend::OnRetryTimer() {
  retry_timer_armed_ = false;
  const int64_t now = MonotonicNs();
  const int64_t bound_ns = int64_t{path_failover_ms_} * 1000000;
  parked_.RetryEach([&](uint32_t id) {
    const auto tag = static_cast<uint16_t>(id / commands_per_tag_);
    TagState& state = tags_[tag];
    if (now - state.failing_since_ns < bound_ns) return Reissue(tag, id % commands_per_tag_);
    --state.parked;
    if (state.error == 0) {
      state.error = EIO;
      if (stats_) stats_->failover_timeouts.fetch_add(1, std::memory_order_relaxed);
    }
    MaybeComplete(tag);
    return true;
  });
  // Successes reset it (OnCompletion); retries that keep failing wait longer each round.
  retry_delay_ms_ = std::min(retry_delay_ms_ * 2, kMaxRetryDelayMs);
}

void NvmeBackend::MaybeComplete(uint16_t tag) {
  TagState& state = tags_[tag];
  // Commands still in flight, parked or waiting for an SQE complete the request later.
  if (state.pending > 0 || state.parked > 0 || state.issued < state.count) return;
  completer_.Complete(tag, state.error != 0 ? -state.error : state.result);
}

void NvmeBackend::OnCompletion(uint16_t tag, const io_uring_cqe& cqe) {
  if (ExtraOf(cqe.user_data) == kRetryTimerExtra) return OnRetryTimer();
  if (tag >= tags_.size()) return;
  TagState& state = tags_[tag];
  --state.pending;
  if (path_failover_ms_ > 0) {
    if (nvme::PathFailure(cqe.res)) {
      Park(tag, ExtraOf(cqe.user_data));
      return MaybeComplete(tag);
    }
    // A path serves again: the next failure is retried soon.
    if (state.failing_since_ns != 0) retry_delay_ms_ = kFirstRetryDelayMs;
  }
  int error = nvme::ErrnoFromCompletion(cqe.res);
  if (error != 0 && nvme::NamespaceGone(cqe.res)) {
    error = EIO;
    if (stats_) {
      stats_->gone_result.store(cqe.res, std::memory_order_relaxed);
      stats_->gone_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (error != 0 && state.error == 0) state.error = error;
  MaybeComplete(tag);
}

}  // namespace blk::server
