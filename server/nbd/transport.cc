#include "server/nbd/transport.h"

#include <limits.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "server/nbd/events.h"

namespace blk::server::nbd {
namespace {

constexpr size_t kRecvBufferBytes = 256 * 1024;
// A read payload with at least this many bytes still to come is received straight into the
// request's buffer by a RECV of its own. Below it, copying is cheaper than that RECV: a receive
// into the shared buffer carries the ends of many small replies at once (a 256 KiB buffer holds
// ~60 replies of 4 KiB), and one extra syscall per read costs more than a memcpy of a few KiB,
// while from 16 KiB on the copy (and the cache it sweeps) costs more than the syscall.
constexpr uint32_t kDirectRecvMinBytes = 16 * 1024;

}  // namespace

Transport::Transport(std::optional<Connection> connection, Requests& requests,
                     const TransportOptions& options, std::unique_ptr<Reconnector> reconnector,
                     std::shared_ptr<Stats> stats)
    : requests_(requests),
      options_(options),
      reconnector_(std::move(reconnector)),
      stats_(std::move(stats)),
      iov_(std::min<size_t>(2 * requests.slots(), IOV_MAX)),
      recv_buffer_(kRecvBufferBytes) {
  if (connection.has_value()) {
    UseConnection(std::move(*connection));
  } else {
    state_ = State::kReconnecting;
  }
}

Transport::~Transport() {
  reconnector_->Stop();
  if (!socket_.valid()) return;
  // Between two requests on the wire, the connection ends the way the protocol asks.
  const bool between_requests = !send_in_flight_ && !(waiting_for_sqe_ & kWaitSend);
  if (state_ == State::kConnected && between_requests) SendDisconnect(socket_.get());
  ::shutdown(socket_.get(), SHUT_RDWR);
}

void Transport::UseConnection(Connection connection) {
  socket_ = std::move(connection.fd);
  structured_replies_ = connection.info.structured_replies;
  requests_.UseExport(connection.info);
  parser_.Reset(structured_replies_);
  after_large_read_ = false;
  ++generation_;
  state_ = State::kConnected;
}

void Transport::Attach(Ring& ring) {
  ring_ = &ring;
  if (state_ == State::kConnected) {
    ArmRecv();
    return;
  }
  if (requests_.OpenOutage()) ArmTimer();
  reconnector_->Start();
  ArmReconnectPoll();
}

void Transport::ArmWaitingOps() {
  const uint8_t waiting = waiting_for_sqe_;
  waiting_for_sqe_ = 0;
  if (waiting & kWaitTimer) ArmTimer();
  if (waiting & kWaitPoll) ArmReconnectPoll();
  if (waiting & kWaitSend) SendRest();
  if (waiting & kWaitRecv) ArmRecv();
}

void Transport::Kick() {
  while (state_ == State::kConnected && !requests_.server_shutting_down() && !send_in_flight_ &&
         !(waiting_for_sqe_ & kWaitSend) && requests_.has_queued()) {
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

bool Transport::GatherSends() {
  msg_ = msghdr{};
  msg_.msg_iov = iov_.data();
  msg_.msg_iovlen = requests_.Gather(iov_.data(), iov_.size());
  return msg_.msg_iovlen > 0;
}

bool Transport::ConsumeSent(size_t sent) {
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

void Transport::SendRest() {
  // The socket was full a moment ago: the SENDMSG waits until it has room (poll first). Nothing
  // else is sent until it completed, which keeps the byte stream in order.
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) {
    waiting_for_sqe_ |= kWaitSend;  // msg_ keeps what is left; nothing else is sent meanwhile
    return;
  }
  io_uring_prep_sendmsg(sqe, socket_.get(), &msg_, MSG_NOSIGNAL);
  sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
  sqe->user_data = EventUserData(kSend, generation_);
  send_in_flight_ = true;
}

void Transport::ArmRecv() {
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
          structured_replies_ ? kStructuredReplyHeaderBytes + 8 : kSimpleReplyHeaderBytes;
      want = std::min(want, payload.length + header);
    }
    io_uring_prep_recv(sqe, socket_.get(), recv_buffer_.data(), want, 0);
    // Most receives are armed right after the last one emptied the socket and the turn's
    // requests went out: no reply can be there yet, so wait for one rather than try first. A reply
    // usually follows right behind a large payload, though.
    if (!after_large_read_) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
  }
  sqe->user_data = EventUserData(kRecv, generation_);
  recv_in_flight_ = true;
}

void Transport::ArmReconnectPoll() {
  if (poll_armed_) return;
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) {
    waiting_for_sqe_ |= kWaitPoll;
    return;
  }
  io_uring_prep_poll_add(sqe, reconnector_->event_fd(), POLLIN);
  sqe->user_data = EventUserData(kReconnected, 0);
  poll_armed_ = true;
}

void Transport::ArmTimer() {
  if (options_.io_timeout_ms == 0) return;
  timeout_.tv_sec = options_.io_timeout_ms / 1000;
  timeout_.tv_nsec = static_cast<long long>(options_.io_timeout_ms % 1000) * 1000000;
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) {
    waiting_for_sqe_ |= kWaitTimer;
    return;
  }
  io_uring_prep_timeout(sqe, &timeout_, 0, 0);
  sqe->user_data = EventUserData(kTimer, requests_.outage());
}

void Transport::OnRecv(int32_t res) {
  recv_in_flight_ = false;
  const bool direct = recv_direct_;
  recv_direct_ = false;
  if (recv_slot_timed_out_) {
    // The kernel is done with the buffer now: the request can fail like the others did (OnTimer).
    // The connection was dropped then, so nothing below feeds the parser.
    recv_slot_timed_out_ = false;
    requests_.TimedOut(recv_slot_);
  }
  if (state_ != State::kConnected) {
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
  absl::Status parsed =
      direct ? parser_.PayloadArrived(static_cast<size_t>(res), requests_)
             : parser_.Feed(recv_buffer_.data(), static_cast<size_t>(res), requests_);
  if (!parsed.ok()) {
    stats_->protocol_errors.fetch_add(1, std::memory_order_relaxed);
    Drop();
    return;
  }
  // Large reads come in runs (sequential I/O): after one, the next receive is kept small.
  after_large_read_ = direct || parser_.PendingPayload().length >= kDirectRecvMinBytes;
  // Not from inside the parser: the rest of the buffer still had replies for this connection.
  if (requests_.server_shutting_down()) {
    Drop();
    return;
  }
  ArmRecv();
}

void Transport::OnSend(int32_t res) {
  send_in_flight_ = false;
  if (state_ != State::kConnected) {
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

void Transport::Drop() {
  if (state_ != State::kConnected) return;
  state_ = State::kDraining;
  // What waited for an SQE belonged to this connection: the next one sends and receives anew.
  waiting_for_sqe_ &= static_cast<uint8_t>(~(kWaitSend | kWaitRecv));
  requests_.ConnectionLost();
  if (requests_.OpenOutage()) ArmTimer();
  // Makes the pending RECV see EOF and the pending SENDMSG fail, so both come back.
  ::shutdown(socket_.get(), SHUT_RDWR);
  MaybeFinishDrain();
}

void Transport::MaybeFinishDrain() {
  if (state_ != State::kDraining || recv_in_flight_ || send_in_flight_) return;
  socket_.Reset();
  state_ = State::kReconnecting;
  reconnector_->Start();
  ArmReconnectPoll();
}

void Transport::OnReconnected() {
  poll_armed_ = false;
  std::optional<Connection> connection = reconnector_->Take();
  if (!connection.has_value()) {
    ArmReconnectPoll();
    return;
  }
  const ExportInfo& info = connection->info;
  const bool compatible = info.size >= options_.device_size->load(std::memory_order_acquire) &&
                          (options_.read_only || !info.read_only()) &&
                          requests_.FitsBlocks(info.min_block);
  if (!compatible) {
    // Not the export the volume was created on (shrunk, read-only now): keep trying.
    reconnector_->Start();
    ArmReconnectPoll();
    return;
  }
  UseConnection(std::move(*connection));
  stats_->reconnects.fetch_add(1, std::memory_order_relaxed);
  requests_.Resend();
  ArmRecv();
}

void Transport::OnTimer(uint32_t outage) {
  if (!requests_.IsOpenOutage(outage)) return;
  if (state_ == State::kConnected) {
    // Reconnected, but the server has answered nothing since the outage began.
    if (!requests_.AnyWaiting()) {
      requests_.CloseOutage();
      return;
    }
    Drop();  // their replies must not come after they failed
  }
  // The kernel may still write into the buffer of the direct RECV's request (the shutdown makes
  // the RECV come back soon): that one fails when it does (OnRecv).
  const bool spare = recv_in_flight_ && recv_direct_;
  if (requests_.FailWaiting(spare ? recv_slot_ : Requests::kNoSlot)) recv_slot_timed_out_ = true;
}

}  // namespace blk::server::nbd
