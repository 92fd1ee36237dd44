// The NBD requests of one connection, one slot each: the queue's own tags, then (when the queues
// share the connection, shared_connection.h) the forwarding queues' Slot(queue, tag). A block I/O
// becomes the NBD requests the export can take, sent one after the other: pieces no larger than
// the server's maximum payload, WRITEs of zeroes for a server without WRITE_ZEROES, a FLUSH after
// the write for a server without FUA. Each request waits in the send queue until the Transport
// gathers it, is found by its cookie when the reply parser reaches its reply (ReplyTargets), and
// ends through the queue's Completer, or, forwarded, with a CqeKind::kResult message to its queue's
// ring.
//
// Durability (exports with a write cache, SEND_FLUSH): writes the server acknowledged but no FLUSH
// has covered yet may die with its cache when the connection drops (a crash). They are not kept
// for a replay; the loss is reported instead: every FLUSH waiting at the drop, or else the next
// one, fails with EIO, as the kernel reports a lost page-cache writeback at the next fsync. What
// is covered and what is lost is the volume's, across its connections (durability.h).
//
// io_timeout: an outage opens when the connection drops and closes when the server answers a
// request again; the Transport times it and, when it lasts io_timeout, fails every waiting request
// here, and new ones fail at once until a connection is back. Knows nothing of sockets.
#pragma once

#include <sys/uio.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "server/backend.h"
#include "server/nbd/durability.h"
#include "server/nbd/protocol.h"
#include "server/nbd/shared_connection.h"
#include "server/nbd/stats.h"
#include "server/ublk/abi.h"
#include "server/ublk/sqe_waitlist.h"

namespace blk::server::nbd {

class Requests final : public ReplyTargets {
 public:
  static constexpr uint32_t kMaxPayloadBytes =
      32u * 1024 * 1024;  // per request, whatever the server

  // `shared`: the volume's queues share this connection (it is queue 0's); null otherwise.
  // `durability`: the volume's, in which this is connection number `connection`.
  // Without `info` (no connection yet: a device recovered while its server is down) requests
  // wait, unsplit, for the first connection's export.
  Requests(const std::optional<ExportInfo>& info, uint16_t queue_depth,
           std::shared_ptr<SharedConnection> shared, std::shared_ptr<Durability> durability,
           uint16_t connection, std::shared_ptr<Stats> stats);

  void Attach(Ring& ring, Completer completer);
  size_t slots() const { return tags_.size(); }

  // A block I/O of the queue's own tag, or (OnForwarded) of a forwarding queue's slot.
  void Submit(uint16_t tag, const BlockIo& io) {
    if (tag >= queue_depth_) return completer_.Complete(tag, -EINVAL);
    Start(tag, io);
  }
  void OnForwarded(uint32_t slot);
  // The MSG_RING of the slot's result came back failed (successful ones post no CQE).
  void OnReplyFailed(uint32_t slot, int32_t res);
  // Posts the results that waited for an SQE.
  void RetryReplies() {
    unreplied_.RetryEach([this](uint32_t slot) { return Reply(slot); });
  }

  // The send queue. Gather moves queued requests into `iov` (a header, and a write's payload) up
  // to `capacity` entries; 0 when none was queued.
  bool has_queued() const { return send_count_ > 0; }
  size_t Gather(iovec* iov, size_t capacity);

  // The export of a new connection; what it must offer for the requests already split.
  void UseExport(const ExportInfo& info);
  bool FitsBlocks(uint32_t min_block) const {
    return max_chunk_ >= min_block && zeroes_.size() >= min_block;
  }
  // A reply said NBD_ESHUTDOWN: nothing more is to be sent on this connection (until UseExport).
  bool server_shutting_down() const { return server_shutting_down_; }
  // A new connection serves: every waiting request is sent again on it, under a new cookie.
  void Resend();

  // The connection dropped: acknowledged writes no FLUSH covered may be lost (see above).
  void ConnectionLost();

  // Outage bookkeeping. OpenOutage: true when this drop began a new outage (arm its timer with
  // outage()); a drop before the server answered anything continues the outage under way.
  bool OpenOutage();
  uint32_t outage() const { return outage_ & 0xFFFFFF; }
  bool IsOpenOutage(uint32_t outage) const { return outage_open_ && outage == this->outage(); }
  void CloseOutage() { outage_open_ = false; }
  bool AnyWaiting() const;
  // The outage lasted io_timeout: every waiting request fails with EIO, but `spared` (whose
  // buffer the kernel may still write: the Transport fails it with TimedOut once it cannot);
  // returns whether `spared` was waiting. New requests fail at once until Resend.
  bool FailWaiting(uint32_t spared);
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  void TimedOut(uint32_t slot);

  // ReplyTargets
  ReplyTarget* Find(uint64_t cookie) override;
  void Complete(uint64_t cookie) override;

 private:
  // kDeferred: waits for the first connection's export before it is split into requests.
  enum class Phase : uint8_t { kIdle, kDeferred, kQueued, kSent };

  struct TagState {
    BlockIo io;
    Phase phase = Phase::kIdle;
    bool started = false;
    bool zero_fill = false;    // WRITE_ZEROES sent as WRITEs of zeroes
    bool flush_after = false;  // FUA sent as a FLUSH after the write
    bool flushing = false;     // the request in flight is that FLUSH
    bool lost = false;         // its FLUSH reports the loss of acknowledged writes: EIO
    uint16_t command = 0;
    uint16_t command_flags = 0;
    uint16_t seq = 0;
    uint32_t done = 0;   // bytes of io covered by answered requests
    uint32_t chunk = 0;  // length of the request in flight
    uint64_t cookie = 0;
    int32_t result = 0;        // a forwarded request's, kept until its queue got it
    uint64_t losses_seen = 0;  // a flushing request's: Durability::losses() when it started
    ReplyTarget target;
    uint8_t header[kRequestHeaderBytes] = {};

    bool waiting() const { return phase != Phase::kIdle; }
    bool flushes() const { return io.op == abi::kIoOpFlush || flush_after; }
  };

  void Start(uint32_t slot, const BlockIo& io);
  bool NextRequest(uint32_t slot);
  void EncodeHeader(TagState& s, uint64_t offset);
  void Enqueue(uint32_t slot);
  void ClearSendQueue();
  void Finish(uint32_t slot, int32_t result);
  // A reply without error to the slot's request in flight: what it makes durable is counted.
  void CountDurability(const TagState& s);
  uint64_t* Marks(uint32_t slot) {
    return flush_marks_.data() + size_t{slot} * durability_->connections();
  }
  // Posts a forwarded request's result to its queue's ring; false when no SQE was free.
  bool Reply(uint32_t slot);

  const uint16_t queue_depth_;
  const std::shared_ptr<SharedConnection> shared_;
  const std::shared_ptr<Stats> stats_;
  Ring* ring_ = nullptr;
  Completer completer_;

  ExportInfo info_;
  bool export_known_ = false;  // a connection told what the export offers
  uint32_t max_chunk_ = kMaxPayloadBytes;
  bool server_shutting_down_ = false;  // it answered NBD_ESHUTDOWN on this connection
  uint32_t outage_ = 0;                // bumped at each drop; the io_timeout timer names the outage
  // From a drop until the server answers a request again (reconnecting alone does not end it).
  bool outage_open_ = false;
  bool failing_ = false;  // the outage outlasted io_timeout

  // Only with SEND_FLUSH: what the server acknowledged, what FLUSHes covered, what drops lost.
  const std::shared_ptr<Durability> durability_;
  const uint16_t connection_;
  std::vector<uint64_t> flush_marks_;  // per slot, Durability::connections() entries

  std::vector<TagState> tags_;
  SqeWaitlist unreplied_;             // forwarded requests whose result waits for an SQE
  std::vector<uint32_t> send_queue_;  // ring buffer of slots waiting to be sent
  size_t send_head_ = 0;
  size_t send_count_ = 0;
  std::vector<uint8_t> zeroes_;
};

}  // namespace blk::server::nbd
