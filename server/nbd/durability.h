// What a volume's FLUSHes have made durable, across all its NBD connections (a connection per
// queue with multi-conn, else one). NBD proto.md, NBD_FLAG_CAN_MULTI_CONN: a FLUSH answered on
// one connection makes durable every write that any connection had seen answered before the FLUSH
// was sent. The block layer sends a FLUSH down the queue of the CPU that asked for it, so the
// accounting is the volume's, not a connection's: kept per connection, a FLUSH on queue 0 after
// queue 1's server lost acknowledged writes would succeed, and one covering queue 1's writes
// would not stop queue 1 from reporting them lost at its next drop.
//
// A drop of any connection may be the server's crash, which loses its whole cache: every write
// of every connection that no FLUSH covered counts as lost (once). The loss is reported to every
// FLUSH waiting at the drop, on any queue, and to the next FLUSH started after it.
//
// Each connection's counter has one writer, its queue thread (a plain store per acknowledged
// write, on a cache line of its own); flushed marks and losses change only at FLUSHes and drops.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace blk::server::nbd {

class Durability {
 public:
  explicit Durability(uint16_t connections);

  uint16_t connections() const { return connections_; }

  // The server answered a write-class request (WRITE, WRITE_ZEROES, TRIM; not FUA) on
  // `connection`. Called by that connection's thread only.
  void Acknowledged(uint16_t connection) {
    std::atomic<uint64_t>& acked = counters_[connection].acked;
    acked.store(acked.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // A FLUSH is being sent: `marks` (connections() entries) receive what it will cover.
  void Mark(uint64_t* marks) const;
  // The server answered that FLUSH without error.
  void Flushed(const uint64_t* marks);

  // A connection dropped. True when writes no FLUSH covered may have died with the server's cache.
  bool Dropped();

  // Counts the losses so far: a FLUSH that sees the count change while it waits reports a loss.
  uint64_t losses() const { return losses_.load(std::memory_order_acquire); }
  // True once after a loss: the FLUSH starting now reports it.
  bool TakeUnreportedLoss() { return unreported_.exchange(false, std::memory_order_acq_rel); }
  // A waiting FLUSH reported the loss: the next one need not.
  void LossReported() { unreported_.store(false, std::memory_order_release); }

 private:
  struct alignas(64) Counters {
    std::atomic<uint64_t> acked{0};
    std::atomic<uint64_t> flushed{0};  // the highest `acked` an answered FLUSH covered
  };

  const uint16_t connections_;
  std::unique_ptr<Counters[]> counters_;
  std::atomic<uint64_t> losses_{0};
  std::atomic<bool> unreported_{false};
};

}  // namespace blk::server::nbd
