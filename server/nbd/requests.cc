#include "server/nbd/requests.h"

#include <algorithm>
#include <cerrno>

#include "server/nbd/events.h"
#include "server/tsan_annotations.h"
#include "server/ublk/abi.h"

namespace blk::server::nbd {
namespace {

constexpr size_t kMaxZeroBuffer = 1024 * 1024;

size_t SlotCount(uint16_t queue_depth, const SharedConnection* shared) {
  return shared != nullptr ? size_t{shared->queues} * queue_depth : queue_depth;
}

}  // namespace

Requests::Requests(const std::optional<ExportInfo>& info, uint16_t queue_depth,
                   std::shared_ptr<SharedConnection> shared, std::shared_ptr<Durability> durability,
                   uint16_t connection, std::shared_ptr<Stats> stats)
    : queue_depth_(queue_depth),
      shared_(std::move(shared)),
      stats_(std::move(stats)),
      durability_(std::move(durability)),
      connection_(connection),
      flush_marks_(SlotCount(queue_depth, shared_.get()) * durability_->connections()),
      tags_(SlotCount(queue_depth, shared_.get())),
      unreplied_(tags_.size()),
      send_queue_(tags_.size()) {
  if (info.has_value()) UseExport(*info);
  zeroes_.assign(std::min<size_t>(max_chunk_, kMaxZeroBuffer), 0);
}

void Requests::Attach(Ring& ring, Completer completer) {
  ring_ = &ring;
  completer_ = completer;
  if (shared_) {
    shared_->rings[0].store(&ring, std::memory_order_relaxed);
    shared_->ring_fds[0].store(ring.get()->ring_fd, std::memory_order_release);
  }
}

void Requests::UseExport(const ExportInfo& info) {
  info_ = info;
  export_known_ = true;
  // Requests carry at most the server's maximum payload, in whole minimum blocks.
  uint32_t max = std::min<uint32_t>(info_.max_payload, kMaxPayloadBytes);
  max -= max % info_.min_block;
  max_chunk_ = std::max(max, info_.min_block);
  server_shutting_down_ = false;
}

void Requests::OnForwarded(uint32_t slot) {
  if (!shared_ || slot < queue_depth_ || slot >= tags_.size()) return;
  HappensAfter(&shared_->requests[slot]);
  Start(slot, shared_->requests[slot]);
}

void Requests::OnReplyFailed(uint32_t slot, int32_t res) {
  // The forwarding queue is alive (it waits for this result): only a transient failure to post
  // the CQE can get here, so post it again.
  if (res == -EOVERFLOW || res == -EAGAIN || res == -ENOMEM) {
    if (!Reply(slot)) unreplied_.Add(slot);
  }
}

bool Requests::Reply(uint32_t slot) {
  const SharedConnection& shared = *shared_;
  const uint16_t queue = static_cast<uint16_t>(slot / shared.depth);
  const uint16_t tag = static_cast<uint16_t>(slot % shared.depth);
  tags_[slot].phase = Phase::kIdle;
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) return false;
  const int ring_fd = shared.ring_fds[queue].load(std::memory_order_acquire);
  // The queue takes its buffer and slot back with the message (HappensAfter on its Ring).
  HappensBefore(shared.rings[queue].load(std::memory_order_relaxed));
  io_uring_prep_msg_ring(sqe, ring_fd, static_cast<uint32_t>(tags_[slot].result),
                         EncodeUserData(CqeKind::kResult, tag), 0);
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  sqe->user_data = EventUserData(kReplyFailed, slot);
  return true;
}

void Requests::Start(uint32_t slot, const BlockIo& io) {
  const bool fua = io.flags & abi::kIoFFua;
  TagState& s = tags_[slot];
  s.io = io;
  if (!export_known_) {
    if (!failing_) {
      s.phase = Phase::kDeferred;
      return;
    }
    stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
    return Finish(slot, -EIO);
  }
  s.flush_after = fua && !info_.can_fua() && info_.can_flush() &&
                  (io.op == abi::kIoOpWrite || io.op == abi::kIoOpWriteZeroes);
  if (s.flushes()) {
    s.lost = durability_->TakeUnreportedLoss();
    s.losses_seen = durability_->losses();
  }
  // Nothing to make durable that the server would not.
  if (io.op == abi::kIoOpFlush && !info_.can_flush()) return Finish(slot, 0);
  // Discard is advisory: a server that cannot trim ignores it successfully.
  if (io.op == abi::kIoOpDiscard && !info_.can_trim()) {
    return Finish(slot, static_cast<int32_t>(io.length));
  }
  if (failing_) {
    stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
    return Finish(slot, -EIO);
  }
  s.started = false;
  s.done = 0;
  s.flushing = false;
  s.zero_fill = io.op == abi::kIoOpWriteZeroes && !info_.can_write_zeroes();
  NextRequest(slot);
  Enqueue(slot);
}

bool Requests::NextRequest(uint32_t slot) {
  TagState& s = tags_[slot];
  const BlockIo& io = s.io;
  const uint32_t remaining = io.length - s.done;
  uint64_t offset = io.offset + s.done;
  uint16_t flags = 0;
  if (s.flushing) return false;
  if (s.started && remaining == 0) {
    if (!s.flush_after) return false;
    s.flushing = true;
    s.command = kCmdFlush;
    s.chunk = 0;
    offset = 0;
  } else {
    switch (io.op) {
      case abi::kIoOpRead:
        s.command = kCmdRead;
        s.chunk = std::min(remaining, max_chunk_);
        break;
      case abi::kIoOpWrite:
        s.command = kCmdWrite;
        s.chunk = std::min(remaining, max_chunk_);
        if ((io.flags & abi::kIoFFua) && info_.can_fua()) flags = kCmdFlagFua;
        break;
      case abi::kIoOpFlush:
        s.command = kCmdFlush;
        s.chunk = 0;
        offset = 0;
        break;
      case abi::kIoOpDiscard:
        s.command = kCmdTrim;
        s.chunk = remaining;
        break;
      case abi::kIoOpWriteZeroes:
        if (s.zero_fill) {
          s.command = kCmdWrite;
          s.chunk = std::min({remaining, max_chunk_, static_cast<uint32_t>(zeroes_.size())});
        } else {
          s.command = kCmdWriteZeroes;
          s.chunk = remaining;
        }
        if ((io.flags & abi::kIoFFua) && info_.can_fua()) flags = kCmdFlagFua;
        break;
    }
  }
  s.started = true;
  s.command_flags = flags;
  EncodeHeader(s, offset);
  return true;
}

void Requests::EncodeHeader(TagState& s, uint64_t offset) {
  const uint32_t slot = static_cast<uint32_t>(&s - tags_.data());
  ++s.seq;
  s.cookie = (uint64_t{s.seq} << 32) | slot;
  s.target = ReplyTarget{};
  s.target.command = s.command;
  s.target.offset = offset;
  s.target.length = s.chunk;
  if (s.command == kCmdRead) s.target.buffer = static_cast<uint8_t*>(s.io.buffer) + s.done;
  EncodeRequest(s.header, s.command_flags, s.command, s.cookie, offset, s.chunk);
}

void Requests::Enqueue(uint32_t slot) {
  tags_[slot].phase = Phase::kQueued;
  send_queue_[(send_head_ + send_count_) % send_queue_.size()] = slot;
  ++send_count_;
}

void Requests::ClearSendQueue() {
  send_head_ = 0;
  send_count_ = 0;
}

size_t Requests::Gather(iovec* iov, size_t capacity) {
  size_t n = 0;
  while (send_count_ > 0 && n + 2 <= capacity) {
    const uint32_t slot = send_queue_[send_head_];
    send_head_ = (send_head_ + 1) % send_queue_.size();
    --send_count_;
    TagState& s = tags_[slot];
    if (s.phase != Phase::kQueued) continue;
    // What the server acknowledged before it receives the FLUSH is what the FLUSH makes durable.
    if (s.command == kCmdFlush) durability_->Mark(Marks(slot));
    iov[n++] = {s.header, sizeof(s.header)};
    if (s.command == kCmdWrite && s.chunk > 0) {
      void* payload = s.zero_fill ? static_cast<void*>(zeroes_.data())
                                  : static_cast<char*>(s.io.buffer) + s.done;
      iov[n++] = {payload, s.chunk};
    }
    s.phase = Phase::kSent;
  }
  return n;
}

void Requests::Finish(uint32_t slot, int32_t result) {
  TagState& s = tags_[slot];
  if (result >= 0 && s.flushes() && !s.lost && durability_->losses() != s.losses_seen) {
    // A drop while it waited lost writes it was to make durable; the next FLUSH need not say so.
    s.lost = true;
    durability_->LossReported();
  }
  if (s.lost && result >= 0) {
    stats_->unflushed_losses.fetch_add(1, std::memory_order_relaxed);
    result = -EIO;
  }
  s.lost = false;
  s.result = result;
  if (slot >= queue_depth_) {
    if (!Reply(slot)) unreplied_.Add(slot);
    return;
  }
  s.phase = Phase::kIdle;
  completer_.Complete(static_cast<uint16_t>(slot), result);
}

ReplyTarget* Requests::Find(uint64_t cookie) {
  const uint32_t slot = static_cast<uint32_t>(cookie);
  if (slot >= tags_.size()) return nullptr;
  TagState& s = tags_[slot];
  if (s.phase != Phase::kSent || s.cookie != cookie) return nullptr;
  return &s.target;
}

void Requests::Complete(uint64_t cookie) {
  const uint32_t slot = static_cast<uint32_t>(cookie);
  TagState& s = tags_[slot];
  if (s.target.nbd_error == kNbdErrShutdown) {
    // The server is going away (a graceful stop, an upgrade): the request waits for the next
    // connection, like one in flight when a connection breaks. Nothing more is sent on this one,
    // and it is dropped once the replies received so far are parsed.
    s.phase = Phase::kQueued;
    server_shutting_down_ = true;
    return;
  }
  // Any other reply comes from a server at work: the outage, if one was under way, is over.
  outage_open_ = false;
  if (s.target.nbd_error != 0) {
    stats_->server_errors.fetch_add(1, std::memory_order_relaxed);
    Finish(slot, -ErrnoOfNbdError(s.target.nbd_error));
    return;
  }
  CountDurability(s);
  if (!s.flushing) s.done += s.chunk;
  if (NextRequest(slot)) {
    Enqueue(slot);
    return;
  }
  const bool transfers = s.io.op != abi::kIoOpFlush;
  Finish(slot, transfers ? static_cast<int32_t>(s.io.length) : 0);
}

void Requests::CountDurability(const TagState& s) {
  if (!info_.can_flush()) return;
  switch (s.command) {
    case kCmdWrite:
    case kCmdWriteZeroes:
    case kCmdTrim:
      if (!(s.command_flags & kCmdFlagFua)) durability_->Acknowledged(connection_);
      break;
    case kCmdFlush:
      durability_->Flushed(Marks(static_cast<uint32_t>(&s - tags_.data())));
      break;
    default:
      break;
  }
}

void Requests::ConnectionLost() { durability_->Dropped(); }

void Requests::Resend() {
  failing_ = false;
  ClearSendQueue();
  for (uint32_t slot = 0; slot < tags_.size(); ++slot) {
    TagState& s = tags_[slot];
    if (s.phase == Phase::kDeferred) {
      Start(slot, s.io);
      continue;
    }
    if (!s.waiting()) continue;
    EncodeHeader(s, s.target.offset);  // the same request under a new cookie
    Enqueue(slot);
  }
}

bool Requests::OpenOutage() {
  // A connection that broke (or whose server went away) before answering anything continues the
  // outage under way: io_timeout counts from its start, so a server that accepts and goes away
  // again and again cannot hold requests forever.
  if (outage_open_) return false;
  outage_open_ = true;
  ++outage_;
  return true;
}

bool Requests::AnyWaiting() const {
  return std::any_of(tags_.begin(), tags_.end(), [](const TagState& s) { return s.waiting(); });
}

bool Requests::FailWaiting(uint32_t spared) {
  outage_open_ = false;
  failing_ = true;
  bool spared_waits = false;
  for (uint32_t slot = 0; slot < tags_.size(); ++slot) {
    if (!tags_[slot].waiting()) continue;
    if (slot == spared) {
      spared_waits = true;
      continue;
    }
    TimedOut(slot);
  }
  ClearSendQueue();
  return spared_waits;
}

void Requests::TimedOut(uint32_t slot) {
  stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
  Finish(slot, -EIO);
}

}  // namespace blk::server::nbd
