// NBD client on a queue's own io_uring, for that queue, or for all the queues of the volume when
// they share its connection (shared_connection.h). Requests are pipelined up to the depth:
// each tag's NBD request (28-byte header, plus the payload for writes) is queued, and at the end of
// the loop turn (EndOfTurn) the queue goes out in one sendmsg from the queue thread, without
// waiting; what the socket does not take then goes by an io_uring SENDMSG, and nothing more is sent
// until that completed (the byte stream stays in order). One RECV at a time
// fills a receive buffer that the incremental reply parser consumes, copying read data into the
// tags' buffers, except when the parser is inside a large read payload: then the RECV takes that
// payload straight into the tag's buffer (no copy; ArmRecv). A finished tag is completed at once
// through the queue's Completer, however many one receive finishes. Requests above the server's
// maximum payload are split and sent one piece after the other. Requests other queues forward are
// tracked in slots after the queue's own tags; their results go to their queue's ring as
// CqeKind::kResult messages.
//
// Faults: a receive or send error, EOF, a malformed reply or a server shutting down (NBD_ESHUTDOWN
// on a request) shuts the socket down; once both operations came back, a Reconnector dials from
// its helper thread and the ring polls its eventfd. Waiting requests are resent on the new
// connection. When the outage lasts io_timeout (from the drop until the server answers a request
// again), every waiting request fails with EIO, and new ones fail at once until the server is back.
// Only io_timeout, or an error the server reports for the request itself, reaches the caller.
#pragma once

#include <linux/time_types.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <memory>
#include <vector>

#include "server/backend.h"
#include "server/nbd/handshake.h"
#include "server/nbd/protocol.h"
#include "server/nbd/reconnector.h"
#include "server/nbd/shared_connection.h"
#include "server/nbd/stats.h"
#include "server/ublk/sqe_waitlist.h"

namespace blk::server::nbd {

struct BackendOptions {
  bool read_only = false;
  // A reconnected export must still be at least this large: the volume's size, raised by
  // Storage::Grow while the device serves I/O (read only on a reconnect, never per I/O).
  std::shared_ptr<const std::atomic<uint64_t>> device_size;
  uint32_t io_timeout_ms = 30000;
  uint16_t queue_depth = 128;
  // Set when the volume's queues share this backend's connection (it is queue 0's).
  std::shared_ptr<SharedConnection> shared;
};

class Backend final : public server::Backend, private ReplyTargets {
 public:
  Backend(Connection connection, const BackendOptions& options,
          std::unique_ptr<Reconnector> reconnector, std::shared_ptr<Stats> stats);
  ~Backend() override;

  absl::Status Attach(Ring& ring, int first_file, Completer completer) override;
  void Submit(uint16_t tag, const BlockIo& io) override;
  void OnCompletion(uint16_t tag, const io_uring_cqe& cqe) override;
  void EndOfTurn() override;

  // Connection-level CQEs carry this tag (never a real one: ublk depths are at most 4096).
  static constexpr uint16_t kConnectionTag = 0xFFFF;
  // The message a forwarding queue posts to this backend's ring for its request in `slot`.
  static uint64_t ForwardedRequestUserData(uint32_t slot);

 private:
  enum class Phase : uint8_t { kIdle, kQueued, kSent };
  enum class ConnState : uint8_t { kConnected, kDraining, kReconnecting };
  // Connection operations that found no free SQE: armed again at the end of the turn.
  enum WaitingOp : uint8_t { kWaitRecv = 1, kWaitSend = 2, kWaitPoll = 4, kWaitTimer = 8 };
  enum Event : uint8_t {
    kRecv = 1,
    kSend = 2,
    kReconnected = 3,
    kTimer = 4,
    kForwarded = 5,    // a request from another queue; extra: its slot
    kReplyFailed = 6,  // the MSG_RING of a forwarded request's result; extra: its slot
  };

  struct TagState {
    BlockIo io;
    Phase phase = Phase::kIdle;
    bool started = false;
    bool zero_fill = false;    // WRITE_ZEROES sent as WRITEs of zeroes
    bool flush_after = false;  // FUA sent as a FLUSH after the write
    bool flushing = false;     // the request in flight is that FLUSH
    uint16_t command = 0;
    uint16_t command_flags = 0;
    uint16_t seq = 0;
    uint32_t done = 0;   // bytes of io covered by answered requests
    uint32_t chunk = 0;  // length of the request in flight
    uint64_t cookie = 0;
    int32_t result = 0;  // a forwarded request's, kept until its queue got it
    ReplyTarget target;
    uint8_t header[kRequestHeaderBytes] = {};
  };

  // ReplyTargets
  ReplyTarget* Find(uint64_t cookie) override;
  void Complete(uint64_t cookie) override;

  void Start(uint32_t slot, const BlockIo& io);
  void OnForwarded(uint32_t slot);
  // Posts a forwarded request's result to its queue's ring; false when no SQE was free.
  bool Reply(uint32_t slot);
  void RetryWaitingOps();
  bool NextRequest(uint32_t slot);
  void EncodeHeader(TagState& s, uint64_t offset);
  void Enqueue(uint32_t slot);
  void Finish(uint32_t slot, int32_t result);
  void Kick();
  // Puts queued requests into msg_ (as many as iov_ holds); false when none was left.
  bool GatherSends();
  // Advances msg_ past `sent` bytes; true when nothing of it is left.
  bool ConsumeSent(size_t sent);
  void SendRest();
  void ArmRecv();
  void ArmReconnectPoll();
  void ArmTimer();
  void OnRecv(int32_t res);
  void OnSend(int32_t res);
  void OnReconnected();
  void OnTimer(uint32_t outage);
  void Drop();
  void MaybeFinishDrain();
  void UseConnection(Connection connection);
  uint64_t ConnectionUserData(Event event, uint32_t extra) const;

  BackendOptions options_;
  std::unique_ptr<Reconnector> reconnector_;
  std::shared_ptr<Stats> stats_;
  Ring* ring_ = nullptr;
  Completer completer_;

  UniqueFd socket_;
  ExportInfo info_;
  uint32_t max_chunk_ = 0;
  ReplyParser parser_{false};
  ConnState state_ = ConnState::kConnected;
  uint32_t generation_ = 0;  // of the connection; stale CQEs of a dropped one are recognised
  uint32_t outage_ = 0;      // bumped at each drop; the io_timeout timer names the outage
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
  SqeWaitlist unreplied_;        // forwarded requests whose result waits for an SQE
  bool failing_ = false;         // the outage outlasted io_timeout
  // From a drop until the server answers a request again (reconnecting alone does not end it).
  bool outage_open_ = false;
  bool server_shutting_down_ = false;  // it answered NBD_ESHUTDOWN on this connection

  // The queue's own tags, then (shared connection) Slot(queue, tag) of the forwarding queues.
  std::vector<TagState> tags_;
  std::vector<uint32_t> send_queue_;  // ring buffer of slots waiting to be sent
  size_t send_head_ = 0;
  size_t send_count_ = 0;
  std::vector<iovec> iov_;
  msghdr msg_{};
  std::vector<uint8_t> recv_buffer_;
  std::vector<uint8_t> zeroes_;
  __kernel_timespec timeout_{};
};

}  // namespace blk::server::nbd
