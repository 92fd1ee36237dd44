#include "server/nbd/backend.h"

#include <limits.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "server/tsan_annotations.h"
#include "server/ublk/abi.h"

namespace blk::server::nbd {
namespace {

constexpr size_t kRecvBufferBytes = 256 * 1024;
// A read payload with at least this many bytes still to come is received straight into the
// request's buffer by a RECV of its own. Below it, copying is cheaper than that RECV: a receive
// into the shared buffer carries the ends of many small replies at once (a 256 KiB buffer holds
// ~60 replies of 4 KiB), and one extra syscall per read costs more than a memcpy of a few KiB,
// while from 16 KiB on the copy (and the cache it sweeps) costs more than the syscall.
constexpr uint32_t kDirectRecvMinBytes = 16 * 1024;
constexpr size_t kMaxZeroBuffer = 1024 * 1024;

size_t SlotCount(const BackendOptions& options) {
  return options.shared ? size_t{options.shared->queues} * options.queue_depth
                        : options.queue_depth;
}

}  // namespace

uint64_t Backend::ForwardedRequestUserData(uint32_t slot) {
  return EncodeUserData(CqeKind::kBackend, kConnectionTag, kForwarded | (slot << 8));
}

Backend::Backend(Connection connection, const BackendOptions& options,
                 std::unique_ptr<Reconnector> reconnector, std::shared_ptr<Stats> stats)
    : options_(options),
      reconnector_(std::move(reconnector)),
      stats_(std::move(stats)),
      unreplied_(SlotCount(options)),
      tags_(SlotCount(options)),
      send_queue_(SlotCount(options)),
      iov_(std::min<size_t>(2 * SlotCount(options), IOV_MAX)),
      recv_buffer_(kRecvBufferBytes) {
  UseConnection(std::move(connection));
  zeroes_.assign(std::min<size_t>(max_chunk_, kMaxZeroBuffer), 0);
}

Backend::~Backend() {
  reconnector_->Stop();
  if (!socket_.valid()) return;
  // Between two requests on the wire, the connection ends the way the protocol asks.
  const bool between_requests = !send_in_flight_ && !(waiting_for_sqe_ & kWaitSend);
  if (state_ == ConnState::kConnected && between_requests) SendDisconnect(socket_.get());
  ::shutdown(socket_.get(), SHUT_RDWR);
}

void Backend::UseConnection(Connection connection) {
  socket_ = std::move(connection.fd);
  info_ = connection.info;
  // Requests carry at most the server's maximum payload, in whole minimum blocks.
  uint32_t max = std::min<uint32_t>(info_.max_payload, 32u * 1024 * 1024);
  max -= max % info_.min_block;
  max_chunk_ = std::max(max, info_.min_block);
  parser_.Reset(info_.structured_replies);
  after_large_read_ = false;
  ++generation_;
  state_ = ConnState::kConnected;
  server_shutting_down_ = false;
}

uint64_t Backend::ConnectionUserData(Event event, uint32_t extra) const {
  return EncodeUserData(CqeKind::kBackend, kConnectionTag, event | (extra << 8));
}

absl::Status Backend::Attach(Ring& ring, int /*first_file*/, Completer completer) {
  ring_ = &ring;
  completer_ = completer;
  if (options_.shared) {
    options_.shared->rings[0].store(&ring, std::memory_order_relaxed);
    options_.shared->ring_fds[0].store(ring.get()->ring_fd, std::memory_order_release);
  }
  ArmRecv();
  return absl::OkStatus();
}

void Backend::Submit(uint16_t tag, const BlockIo& io) {
  if (tag >= options_.queue_depth) return completer_.Complete(tag, -EINVAL);
  Start(tag, io);
}

void Backend::OnForwarded(uint32_t slot) {
  if (!options_.shared || slot < options_.queue_depth || slot >= tags_.size()) return;
  HappensAfter(&options_.shared->requests[slot]);
  Start(slot, options_.shared->requests[slot]);
}

bool Backend::Reply(uint32_t slot) {
  const SharedConnection& shared = *options_.shared;
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
  sqe->user_data = ConnectionUserData(kReplyFailed, slot);
  return true;
}

void Backend::Start(uint32_t slot, const BlockIo& io) {
  const bool fua = io.flags & abi::kIoFFua;
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
  TagState& s = tags_[slot];
  s.io = io;
  s.started = false;
  s.done = 0;
  s.flushing = false;
  s.zero_fill = io.op == abi::kIoOpWriteZeroes && !info_.can_write_zeroes();
  s.flush_after = fua && !info_.can_fua() && info_.can_flush() &&
                  (io.op == abi::kIoOpWrite || io.op == abi::kIoOpWriteZeroes);
  NextRequest(slot);
  Enqueue(slot);
}

void Backend::EndOfTurn() {
  if (waiting_for_sqe_ != 0) RetryWaitingOps();
  unreplied_.RetryEach([this](uint32_t slot) { return Reply(slot); });
  Kick();
}

void Backend::RetryWaitingOps() {
  const uint8_t waiting = waiting_for_sqe_;
  waiting_for_sqe_ = 0;
  if (waiting & kWaitTimer) ArmTimer();
  if (waiting & kWaitPoll) ArmReconnectPoll();
  if (waiting & kWaitSend) SendRest();
  if (waiting & kWaitRecv) ArmRecv();
}

bool Backend::NextRequest(uint32_t slot) {
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

void Backend::EncodeHeader(TagState& s, uint64_t offset) {
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

void Backend::Enqueue(uint32_t slot) {
  tags_[slot].phase = Phase::kQueued;
  send_queue_[(send_head_ + send_count_) % send_queue_.size()] = slot;
  ++send_count_;
}

void Backend::Finish(uint32_t slot, int32_t result) {
  TagState& s = tags_[slot];
  s.result = result;
  if (slot >= options_.queue_depth) {
    if (!Reply(slot)) unreplied_.Add(slot);
    return;
  }
  s.phase = Phase::kIdle;
  completer_.Complete(static_cast<uint16_t>(slot), result);
}

void Backend::Kick() {
  while (state_ == ConnState::kConnected && !server_shutting_down_ && !send_in_flight_ &&
         !(waiting_for_sqe_ & kWaitSend) && send_count_ > 0) {
    if (!GatherSends()) return;
    // Straight from this thread, without waiting: a send the socket takes whole costs one system
    // call and no completion (an io_uring SENDMSG would complete at once and end the next wait
    // before anything else arrived).
    const ssize_t sent = ::sendmsg(socket_.get(), &msg_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      Drop();
      return;
    }
    if (!ConsumeSent(sent > 0 ? static_cast<size_t>(sent) : 0)) SendRest();
  }
}

bool Backend::GatherSends() {
  size_t n = 0;
  while (send_count_ > 0 && n + 2 <= iov_.size()) {
    const uint32_t slot = send_queue_[send_head_];
    send_head_ = (send_head_ + 1) % send_queue_.size();
    --send_count_;
    TagState& s = tags_[slot];
    if (s.phase != Phase::kQueued) continue;
    iov_[n++] = {s.header, sizeof(s.header)};
    if (s.command == kCmdWrite && s.chunk > 0) {
      void* payload = s.zero_fill ? static_cast<void*>(zeroes_.data())
                                  : static_cast<char*>(s.io.buffer) + s.done;
      iov_[n++] = {payload, s.chunk};
    }
    s.phase = Phase::kSent;
  }
  msg_ = msghdr{};
  msg_.msg_iov = iov_.data();
  msg_.msg_iovlen = n;
  return n > 0;
}

bool Backend::ConsumeSent(size_t sent) {
  while (sent > 0 && msg_.msg_iovlen > 0) {
    iovec& first = msg_.msg_iov[0];
    if (sent >= first.iov_len) {
      sent -= first.iov_len;
      ++msg_.msg_iov;
      --msg_.msg_iovlen;
    } else {
      first.iov_base = static_cast<char*>(first.iov_base) + sent;
      first.iov_len -= sent;
      sent = 0;
    }
  }
  return msg_.msg_iovlen == 0;
}

void Backend::SendRest() {
  // The socket was full a moment ago: the SENDMSG waits until it has room (poll first). Nothing
  // else is sent until it completed, which keeps the byte stream in order.
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) {
    waiting_for_sqe_ |= kWaitSend;  // msg_ keeps what is left; nothing else is sent meanwhile
    return;
  }
  io_uring_prep_sendmsg(sqe, socket_.get(), &msg_, MSG_NOSIGNAL);
  sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
  sqe->user_data = ConnectionUserData(kSend, generation_);
  send_in_flight_ = true;
}

void Backend::ArmRecv() {
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) {
    waiting_for_sqe_ |= kWaitRecv;
    return;
  }
  const ReplyParser::Payload payload = parser_.PendingPayload();
  recv_direct_ = payload.length >= kDirectRecvMinBytes;
  if (recv_direct_) {
    // Exactly the payload's bytes, at their place: the next reply's header is not in it. A short
    // receive (EOF, error) ends the operation with what arrived; the parser then waits for the
    // rest.
    recv_slot_ = static_cast<uint32_t>(payload.cookie);
    io_uring_prep_recv(sqe, socket_.get(), payload.dst, payload.length, MSG_WAITALL);
  } else {
    size_t want = recv_buffer_.size();
    if (after_large_read_) {
      // The rest of a small payload and the next reply's header (with a data chunk's offset):
      // were the next reply a large read, its payload is then received in place too, rather than
      // swept into this buffer and copied.
      const size_t header =
          info_.structured_replies ? kStructuredReplyHeaderBytes + 8 : kSimpleReplyHeaderBytes;
      want = std::min(want, payload.length + header);
    }
    io_uring_prep_recv(sqe, socket_.get(), recv_buffer_.data(), want, 0);
    // Most receives are armed right after the last one emptied the socket and the turn's
    // requests went out: no reply can be there yet, so wait for one rather than try first. A reply
    // usually follows right behind a large payload, though.
    if (!after_large_read_) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
  }
  sqe->user_data = ConnectionUserData(kRecv, generation_);
  recv_in_flight_ = true;
}

void Backend::ArmReconnectPoll() {
  if (poll_armed_) return;
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) {
    waiting_for_sqe_ |= kWaitPoll;
    return;
  }
  io_uring_prep_poll_add(sqe, reconnector_->event_fd(), POLLIN);
  sqe->user_data = ConnectionUserData(kReconnected, 0);
  poll_armed_ = true;
}

void Backend::ArmTimer() {
  if (options_.io_timeout_ms == 0) return;
  timeout_.tv_sec = options_.io_timeout_ms / 1000;
  timeout_.tv_nsec = static_cast<long long>(options_.io_timeout_ms % 1000) * 1000000;
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) {
    waiting_for_sqe_ |= kWaitTimer;
    return;
  }
  io_uring_prep_timeout(sqe, &timeout_, 0, 0);
  sqe->user_data = ConnectionUserData(kTimer, outage_ & 0xFFFFFF);
}

void Backend::OnCompletion(uint16_t tag, const io_uring_cqe& cqe) {
  if (tag != kConnectionTag) return;  // every operation of this backend is the connection's
  const uint32_t extra = ExtraOf(cqe.user_data);
  switch (static_cast<Event>(extra & 0xFF)) {
    case kRecv:
      OnRecv(cqe.res);
      break;
    case kSend:
      OnSend(cqe.res);
      break;
    case kReconnected:
      poll_armed_ = false;
      OnReconnected();
      break;
    case kTimer:
      OnTimer(extra >> 8);
      break;
    case kForwarded:
      OnForwarded(extra >> 8);
      break;
    case kReplyFailed:
      // The forwarding queue is alive (it waits for this result): only a transient failure to
      // post the CQE can get here, so post it again.
      if (cqe.res == -EOVERFLOW || cqe.res == -EAGAIN || cqe.res == -ENOMEM) {
        if (!Reply(extra >> 8)) unreplied_.Add(extra >> 8);
      }
      break;
  }
}

void Backend::OnRecv(int32_t res) {
  recv_in_flight_ = false;
  const bool direct = recv_direct_;
  recv_direct_ = false;
  if (recv_slot_timed_out_) {
    // The kernel is done with the buffer now: the request can fail like the others did (OnTimer).
    // The connection was dropped then, so nothing below feeds the parser.
    recv_slot_timed_out_ = false;
    stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
    Finish(recv_slot_, -EIO);
  }
  if (state_ != ConnState::kConnected) {
    MaybeFinishDrain();
    return;
  }
  if (res == -EINTR || res == -EAGAIN) {
    ArmRecv();
    return;
  }
  if (res <= 0) {
    Drop();
    return;
  }
  absl::Status parsed = direct ? parser_.PayloadArrived(static_cast<size_t>(res), *this)
                               : parser_.Feed(recv_buffer_.data(), static_cast<size_t>(res), *this);
  if (!parsed.ok()) {
    stats_->protocol_errors.fetch_add(1, std::memory_order_relaxed);
    Drop();
    return;
  }
  // Large reads come in runs (sequential I/O): after one, the next receive is kept small.
  after_large_read_ = direct || parser_.PendingPayload().length >= kDirectRecvMinBytes;
  // Not from inside the parser: the rest of the buffer still had replies for this connection.
  if (server_shutting_down_) {
    Drop();
    return;
  }
  ArmRecv();
}

void Backend::OnSend(int32_t res) {
  send_in_flight_ = false;
  if (state_ != ConnState::kConnected) {
    MaybeFinishDrain();
    return;
  }
  if (res < 0 && res != -EINTR && res != -EAGAIN) {
    Drop();
    return;
  }
  // A short send: continue from where it stopped, with the same iovecs. Once all went, the end
  // of the turn sends what queued up meanwhile.
  if (!ConsumeSent(res > 0 ? static_cast<size_t>(res) : 0)) SendRest();
}

ReplyTarget* Backend::Find(uint64_t cookie) {
  const uint32_t slot = static_cast<uint32_t>(cookie);
  if (slot >= tags_.size()) return nullptr;
  TagState& s = tags_[slot];
  if (s.phase != Phase::kSent || s.cookie != cookie) return nullptr;
  return &s.target;
}

void Backend::Complete(uint64_t cookie) {
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
  if (!s.flushing) s.done += s.chunk;
  if (NextRequest(slot)) {
    Enqueue(slot);
    return;
  }
  const bool transfers = s.io.op != abi::kIoOpFlush;
  Finish(slot, transfers ? static_cast<int32_t>(s.io.length) : 0);
}

void Backend::Drop() {
  if (state_ != ConnState::kConnected) return;
  state_ = ConnState::kDraining;
  // What waited for an SQE belonged to this connection: the next one sends and receives anew.
  waiting_for_sqe_ &= static_cast<uint8_t>(~(kWaitSend | kWaitRecv));
  // A connection that broke (or whose server went away) before answering anything continues the
  // outage under way: io_timeout counts from its start, so a server that accepts and goes away
  // again and again cannot hold requests forever.
  if (!outage_open_) {
    outage_open_ = true;
    ++outage_;
    ArmTimer();
  }
  // Makes the pending RECV see EOF and the pending SENDMSG fail, so both come back.
  ::shutdown(socket_.get(), SHUT_RDWR);
  MaybeFinishDrain();
}

void Backend::MaybeFinishDrain() {
  if (state_ != ConnState::kDraining || recv_in_flight_ || send_in_flight_) return;
  socket_.Reset();
  state_ = ConnState::kReconnecting;
  reconnector_->Start();
  ArmReconnectPoll();
}

void Backend::OnReconnected() {
  std::optional<Connection> connection = reconnector_->Take();
  if (!connection.has_value()) {
    ArmReconnectPoll();
    return;
  }
  const ExportInfo& info = connection->info;
  const bool compatible = info.size >= options_.device_size->load(std::memory_order_acquire) &&
                          (options_.read_only || !info.read_only()) &&
                          max_chunk_ >= info.min_block && zeroes_.size() >= info.min_block;
  if (!compatible) {
    // Not the export the volume was created on (shrunk, read-only now): keep trying.
    reconnector_->Start();
    ArmReconnectPoll();
    return;
  }
  UseConnection(std::move(*connection));
  stats_->reconnects.fetch_add(1, std::memory_order_relaxed);
  failing_ = false;
  // Resend everything that waited, as new requests on the new connection.
  send_head_ = 0;
  send_count_ = 0;
  for (uint32_t slot = 0; slot < tags_.size(); ++slot) {
    TagState& s = tags_[slot];
    if (s.phase != Phase::kQueued && s.phase != Phase::kSent) continue;
    EncodeHeader(s, s.target.offset);  // the same request under a new cookie
    Enqueue(slot);
  }
  ArmRecv();
}

void Backend::OnTimer(uint32_t outage) {
  if (!outage_open_ || outage != (outage_ & 0xFFFFFF)) return;
  if (state_ == ConnState::kConnected) {
    // Reconnected, but the server has answered nothing since the outage began.
    const bool waiting = std::any_of(tags_.begin(), tags_.end(), [](const TagState& s) {
      return s.phase == Phase::kQueued || s.phase == Phase::kSent;
    });
    if (!waiting) {
      outage_open_ = false;
      return;
    }
    Drop();  // their replies must not come after they failed
  }
  outage_open_ = false;
  failing_ = true;
  for (uint32_t slot = 0; slot < tags_.size(); ++slot) {
    TagState& s = tags_[slot];
    if (s.phase != Phase::kQueued && s.phase != Phase::kSent) continue;
    if (recv_in_flight_ && recv_direct_ && slot == recv_slot_) {
      // The kernel may still write into its buffer (the shutdown makes the RECV come back soon):
      // it fails when it does (OnRecv).
      recv_slot_timed_out_ = true;
      continue;
    }
    stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
    Finish(slot, -EIO);
  }
  send_head_ = 0;
  send_count_ = 0;
}

}  // namespace blk::server::nbd
