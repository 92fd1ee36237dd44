#include "server/nbd_backend.h"

#include <limits.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "server/ublk_abi.h"

namespace blk::server {
namespace {

constexpr size_t kRecvBufferBytes = 256 * 1024;
constexpr size_t kMaxZeroBuffer = 1024 * 1024;
constexpr uint32_t kFinishExtra = 1;

}  // namespace

NbdBackend::NbdBackend(NbdConnection connection, NbdBackendOptions options,
                       std::unique_ptr<NbdReconnector> reconnector, std::shared_ptr<NbdStats> stats)
    : options_(options),
      reconnector_(std::move(reconnector)),
      stats_(std::move(stats)),
      tags_(options.queue_depth),
      send_queue_(options.queue_depth),
      iov_(std::min<size_t>(2u * options.queue_depth, IOV_MAX)),
      recv_buffer_(kRecvBufferBytes) {
  UseConnection(std::move(connection));
  zeroes_.assign(std::min<size_t>(max_chunk_, kMaxZeroBuffer), 0);
}

NbdBackend::~NbdBackend() {
  reconnector_->Stop();
  if (socket_.valid()) ::shutdown(socket_.get(), SHUT_RDWR);
}

void NbdBackend::UseConnection(NbdConnection connection) {
  socket_ = std::move(connection.fd);
  info_ = connection.info;
  // Requests carry at most the server's maximum payload, in whole minimum blocks.
  uint32_t max = std::min<uint32_t>(info_.max_payload, 32u * 1024 * 1024);
  max -= max % info_.min_block;
  max_chunk_ = std::max(max, info_.min_block);
  parser_.Reset(info_.structured_replies);
  ++generation_;
  state_ = ConnState::kConnected;
}

uint64_t NbdBackend::ConnectionUserData(Event event, uint32_t extra) const {
  return EncodeUserData(CqeKind::kBackend, kConnectionTag, event | (extra << 8));
}

absl::Status NbdBackend::Attach(Ring& ring, int /*first_file*/) {
  ring_ = &ring;
  ArmRecv();
  return absl::OkStatus();
}

int32_t NbdBackend::Submit(uint16_t tag, const BlockIo& io) {
  if (tag >= tags_.size()) return -EINVAL;
  const bool fua = io.flags & abi::kIoFFua;
  switch (io.op) {
    case abi::kIoOpRead:
      break;
    case abi::kIoOpFlush:
      if (!info_.can_flush()) return 0;  // nothing to make durable that the server would not
      break;
    case abi::kIoOpDiscard:
      if (options_.read_only) return -EROFS;
      if (!info_.can_trim()) return static_cast<int32_t>(io.length);  // advisory
      break;
    case abi::kIoOpWrite:
    case abi::kIoOpWriteZeroes:
      if (options_.read_only) return -EROFS;
      break;
    default:
      return -EOPNOTSUPP;
  }
  if (failing_) return -EIO;
  TagState& s = tags_[tag];
  s.io = io;
  s.started = false;
  s.done = 0;
  s.flushing = false;
  s.zero_fill = io.op == abi::kIoOpWriteZeroes && !info_.can_write_zeroes();
  s.flush_after = fua && !info_.can_fua() && info_.can_flush() &&
                  (io.op == abi::kIoOpWrite || io.op == abi::kIoOpWriteZeroes);
  NextRequest(tag);
  Enqueue(tag);
  Kick();
  return kInFlight;
}

bool NbdBackend::NextRequest(uint16_t tag) {
  TagState& s = tags_[tag];
  const BlockIo& io = s.io;
  const uint32_t remaining = io.length - s.done;
  uint64_t offset = io.offset + s.done;
  uint16_t flags = 0;
  if (s.flushing) return false;
  if (s.started && remaining == 0) {
    if (!s.flush_after) return false;
    s.flushing = true;
    s.command = nbd::kCmdFlush;
    s.chunk = 0;
    offset = 0;
  } else {
    switch (io.op) {
      case abi::kIoOpRead:
        s.command = nbd::kCmdRead;
        s.chunk = std::min(remaining, max_chunk_);
        break;
      case abi::kIoOpWrite:
        s.command = nbd::kCmdWrite;
        s.chunk = std::min(remaining, max_chunk_);
        if ((io.flags & abi::kIoFFua) && info_.can_fua()) flags = nbd::kCmdFlagFua;
        break;
      case abi::kIoOpFlush:
        s.command = nbd::kCmdFlush;
        s.chunk = 0;
        offset = 0;
        break;
      case abi::kIoOpDiscard:
        s.command = nbd::kCmdTrim;
        s.chunk = remaining;
        break;
      case abi::kIoOpWriteZeroes:
        if (s.zero_fill) {
          s.command = nbd::kCmdWrite;
          s.chunk = std::min({remaining, max_chunk_, static_cast<uint32_t>(zeroes_.size())});
        } else {
          s.command = nbd::kCmdWriteZeroes;
          s.chunk = remaining;
        }
        if ((io.flags & abi::kIoFFua) && info_.can_fua()) flags = nbd::kCmdFlagFua;
        break;
    }
  }
  s.started = true;
  s.command_flags = flags;
  EncodeHeader(s, offset);
  return true;
}

void NbdBackend::EncodeHeader(TagState& s, uint64_t offset) {
  const uint16_t tag = static_cast<uint16_t>(&s - tags_.data());
  ++s.seq;
  s.cookie = (uint64_t{s.seq} << 16) | tag;
  s.target = nbd::ReplyTarget{};
  s.target.command = s.command;
  s.target.offset = offset;
  s.target.length = s.chunk;
  if (s.command == nbd::kCmdRead) s.target.buffer = static_cast<uint8_t*>(s.io.buffer) + s.done;
  nbd::EncodeRequest(s.header, s.command_flags, s.command, s.cookie, offset, s.chunk);
}

void NbdBackend::Enqueue(uint16_t tag) {
  tags_[tag].phase = Phase::kQueued;
  send_queue_[(send_head_ + send_count_) % send_queue_.size()] = tag;
  ++send_count_;
}

void NbdBackend::Finish(uint16_t tag, int32_t result) {
  TagState& s = tags_[tag];
  s.result = result;
  s.phase = Phase::kFinishing;
  io_uring_sqe* sqe = ring_->GetSqe();
  io_uring_prep_nop(sqe);
  sqe->user_data = EncodeUserData(CqeKind::kBackend, tag, kFinishExtra);
}

void NbdBackend::Kick() {
  if (state_ != ConnState::kConnected || send_in_flight_ || send_count_ == 0) return;
  size_t n = 0;
  while (send_count_ > 0 && n + 2 <= iov_.size()) {
    const uint16_t tag = send_queue_[send_head_];
    send_head_ = (send_head_ + 1) % send_queue_.size();
    --send_count_;
    TagState& s = tags_[tag];
    if (s.phase != Phase::kQueued) continue;
    iov_[n++] = {s.header, sizeof(s.header)};
    if (s.command == nbd::kCmdWrite && s.chunk > 0) {
      void* payload = s.zero_fill ? static_cast<void*>(zeroes_.data())
                                  : static_cast<char*>(s.io.buffer) + s.done;
      iov_[n++] = {payload, s.chunk};
    }
    s.phase = Phase::kSent;
  }
  if (n == 0) return;
  msg_ = msghdr{};
  msg_.msg_iov = iov_.data();
  msg_.msg_iovlen = n;
  io_uring_sqe* sqe = ring_->GetSqe();
  io_uring_prep_sendmsg(sqe, socket_.get(), &msg_, MSG_NOSIGNAL);
  sqe->user_data = ConnectionUserData(kSend, generation_);
  send_in_flight_ = true;
}

void NbdBackend::ArmRecv() {
  io_uring_sqe* sqe = ring_->GetSqe();
  io_uring_prep_recv(sqe, socket_.get(), recv_buffer_.data(), recv_buffer_.size(), 0);
  sqe->user_data = ConnectionUserData(kRecv, generation_);
  recv_in_flight_ = true;
}

void NbdBackend::ArmReconnectPoll() {
  if (poll_armed_) return;
  io_uring_sqe* sqe = ring_->GetSqe();
  io_uring_prep_poll_add(sqe, reconnector_->event_fd(), POLLIN);
  sqe->user_data = ConnectionUserData(kReconnected, 0);
  poll_armed_ = true;
}

void NbdBackend::ArmTimer() {
  if (options_.io_timeout_ms == 0) return;
  timeout_.tv_sec = options_.io_timeout_ms / 1000;
  timeout_.tv_nsec = static_cast<long long>(options_.io_timeout_ms % 1000) * 1000000;
  io_uring_sqe* sqe = ring_->GetSqe();
  io_uring_prep_timeout(sqe, &timeout_, 0, 0);
  sqe->user_data = ConnectionUserData(kTimer, outage_ & 0xFFFFFF);
}

int32_t NbdBackend::OnCompletion(uint16_t tag, const io_uring_cqe& cqe) {
  if (tag != kConnectionTag) {
    if (tag >= tags_.size() || tags_[tag].phase != Phase::kFinishing) return kInFlight;
    tags_[tag].phase = Phase::kIdle;
    return tags_[tag].result;
  }
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
  }
  return kInFlight;
}

void NbdBackend::OnRecv(int32_t res) {
  recv_in_flight_ = false;
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
  absl::Status parsed = parser_.Feed(recv_buffer_.data(), static_cast<size_t>(res), *this);
  if (!parsed.ok()) {
    stats_->protocol_errors.fetch_add(1, std::memory_order_relaxed);
    Drop();
    return;
  }
  ArmRecv();
  Kick();
}

void NbdBackend::OnSend(int32_t res) {
  send_in_flight_ = false;
  if (state_ != ConnState::kConnected) {
    MaybeFinishDrain();
    return;
  }
  if (res < 0 && res != -EINTR && res != -EAGAIN) {
    Drop();
    return;
  }
  // A short send: continue from where it stopped, with the same iovecs.
  size_t sent = res > 0 ? static_cast<size_t>(res) : 0;
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
  if (msg_.msg_iovlen > 0) {
    io_uring_sqe* sqe = ring_->GetSqe();
    io_uring_prep_sendmsg(sqe, socket_.get(), &msg_, MSG_NOSIGNAL);
    sqe->user_data = ConnectionUserData(kSend, generation_);
    send_in_flight_ = true;
    return;
  }
  Kick();
}

nbd::ReplyTarget* NbdBackend::Find(uint64_t cookie) {
  const uint16_t tag = static_cast<uint16_t>(cookie);
  if (tag >= tags_.size()) return nullptr;
  TagState& s = tags_[tag];
  if (s.phase != Phase::kSent || s.cookie != cookie) return nullptr;
  return &s.target;
}

void NbdBackend::Complete(uint64_t cookie) {
  const uint16_t tag = static_cast<uint16_t>(cookie);
  TagState& s = tags_[tag];
  if (s.target.nbd_error != 0) {
    stats_->server_errors.fetch_add(1, std::memory_order_relaxed);
    Finish(tag, -nbd::ErrnoOfNbdError(s.target.nbd_error));
    return;
  }
  if (!s.flushing) s.done += s.chunk;
  if (NextRequest(tag)) {
    Enqueue(tag);
    return;
  }
  const bool transfers = s.io.op != abi::kIoOpFlush;
  Finish(tag, transfers ? static_cast<int32_t>(s.io.length) : 0);
}

void NbdBackend::Drop() {
  if (state_ != ConnState::kConnected) return;
  state_ = ConnState::kDraining;
  ++outage_;
  // Makes the pending RECV see EOF and the pending SENDMSG fail, so both come back.
  ::shutdown(socket_.get(), SHUT_RDWR);
  ArmTimer();
  MaybeFinishDrain();
}

void NbdBackend::MaybeFinishDrain() {
  if (state_ != ConnState::kDraining || recv_in_flight_ || send_in_flight_) return;
  socket_.Reset();
  state_ = ConnState::kReconnecting;
  reconnector_->Start();
  ArmReconnectPoll();
}

void NbdBackend::OnReconnected() {
  std::optional<NbdConnection> connection = reconnector_->Take();
  if (!connection.has_value()) {
    ArmReconnectPoll();
    return;
  }
  const nbd::ExportInfo& info = connection->info;
  const bool compatible = info.size >= options_.device_size &&
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
  for (uint16_t tag = 0; tag < tags_.size(); ++tag) {
    TagState& s = tags_[tag];
    if (s.phase != Phase::kQueued && s.phase != Phase::kSent) continue;
    EncodeHeader(s, s.target.offset);  // the same request under a new cookie
    Enqueue(tag);
  }
  ArmRecv();
  Kick();
}

void NbdBackend::OnTimer(uint32_t outage) {
  if (state_ == ConnState::kConnected || outage != (outage_ & 0xFFFFFF)) return;
  failing_ = true;
  for (uint16_t tag = 0; tag < tags_.size(); ++tag) {
    TagState& s = tags_[tag];
    if (s.phase != Phase::kQueued && s.phase != Phase::kSent) continue;
    stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
    Finish(tag, -EIO);
  }
  send_head_ = 0;
  send_count_ = 0;
}

}  // namespace blk::server
