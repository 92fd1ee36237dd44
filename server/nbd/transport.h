// The NBD connection on a queue's own io_uring: it moves the Requests' bytes and keeps the
// connection up. At the end of the loop turn (Kick) the queued requests go out in one sendmsg from
// the queue thread, without waiting; what the socket does not take then goes by an io_uring
// SENDMSG, and nothing more is sent until that completed (the byte stream stays in order). One
// RECV at a time fills a receive buffer that the incremental reply parser consumes, copying read
// data into the requests' buffers, except when the parser is inside a large read payload: then the
// RECV takes that payload straight into the request's buffer (no copy; ArmRecv).
//
// Faults: a receive or send error, EOF, a malformed reply or a server shutting down (NBD_ESHUTDOWN
// on a request) shuts the socket down; once both operations came back, the Reconnector dials from
// its helper thread and the ring polls its eventfd. Waiting requests are resent on the new
// connection. The io_timeout timer runs from the drop; when it fires before the server answered
// again, the Requests fail every waiting request with EIO.
#pragma once

#include <linux/time_types.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/unique_fd.h"
#include "server/nbd/handshake.h"
#include "server/nbd/protocol.h"
#include "server/nbd/reconnector.h"
#include "server/nbd/requests.h"
#include "server/nbd/stats.h"
#include "server/ublk/ring.h"

namespace blk::server::nbd {

struct TransportOptions {
  bool read_only = false;
  // A reconnected export must still be at least this large: the volume's size, raised by
  // Storage::Grow while the device serves I/O (read only on a reconnect, never per I/O).
  std::shared_ptr<const std::atomic<uint64_t>> device_size;
  uint32_t io_timeout_ms = 30000;
};

class Transport {
 public:
  // `requests` outlives the Transport. Without a `connection` it starts reconnecting at Attach,
  // an outage under way (io_timeout counts from then).
  Transport(std::optional<Connection> connection, Requests& requests,
            const TransportOptions& options, std::unique_ptr<Reconnector> reconnector,
            std::shared_ptr<Stats> stats);
  // Ends the connection the way the protocol asks when it is between two requests.
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  void Attach(Ring& ring);
  // Sends what the Requests queued (end of the loop turn).
  void Kick();
  // Arms again what found no free SQE.
  void RetryWaitingOps() {
    if (waiting_for_sqe_ != 0) ArmWaitingOps();
  }

  void OnRecv(int32_t res);
  void OnSend(int32_t res);
  void OnReconnected();
  void OnTimer(uint32_t outage);

 private:
  enum class State : uint8_t { kConnected, kDraining, kReconnecting };
  // Connection operations that found no free SQE: armed again at the end of the turn.
  enum WaitingOp : uint8_t { kWaitRecv = 1, kWaitSend = 2, kWaitPoll = 4, kWaitTimer = 8 };

  void ArmWaitingOps();
  // Puts queued requests into msg_ (as many as iov_ holds); false when none was left.
  bool GatherSends();
  // Advances msg_ past `sent` bytes; true when nothing of it is left.
  bool ConsumeSent(size_t sent);
  void SendRest();
  void ArmRecv();
  void ArmReconnectPoll();
  void ArmTimer();
  void Drop();
  void MaybeFinishDrain();
  void UseConnection(Connection connection);

  Requests& requests_;
  const TransportOptions options_;
  const std::unique_ptr<Reconnector> reconnector_;
  const std::shared_ptr<Stats> stats_;
  Ring* ring_ = nullptr;

  UniqueFd socket_;
  bool structured_replies_ = false;
  ReplyParser parser_{false};
  State state_ = State::kConnected;
  uint32_t generation_ = 0;  // of the connection; stale CQEs of a dropped one are recognised
  bool recv_in_flight_ = false;
  // The RECV in flight writes read data straight into the buffer of this slot's request (ArmRecv).
  // Until it comes back, that request must not end: its buffer goes back to the block layer then.
  bool recv_direct_ = false;
  uint32_t recv_slot_ = 0;
  // io_timeout failed every waiting request while that RECV was in flight: the slot's failure
  // waits for the RECV (OnTimer, OnRecv).
  bool recv_slot_timed_out_ = false;
  // The last receive was such a payload (or ended inside one): the next one into the shared buffer
  // stops at the next reply's header, so that a large payload after it is received in place too.
  // The first reply that is not a large read ends it.
  bool after_large_read_ = false;
  bool send_in_flight_ = false;
  bool poll_armed_ = false;
  uint8_t waiting_for_sqe_ = 0;  // WaitingOp bits

  std::vector<iovec> iov_;
  msghdr msg_{};
  std::vector<uint8_t> recv_buffer_;
  __kernel_timespec timeout_{};
};

}  // namespace blk::server::nbd
