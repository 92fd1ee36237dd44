// The writes a server acknowledged since its last FLUSH, kept so that a server that crashes with
// them in its volatile cache does not lose them: after a reconnect they are sent again (replayed),
// and acknowledged, before any FLUSH goes out on the new connection. Only an export with a write
// cache (NBD_FLAG_SEND_FLUSH) needs this: elsewhere an acknowledged write is durable.
//
// One pool per connection, allocated whole when the connection's Requests are made: the hot path
// allocates nothing and takes no lock. Its price is a memcpy of each acknowledged write's payload
// into the pool (WRITE_ZEROES, TRIM and writes of zeroes keep their offset and length only).
// Entries are kept in the order of their acknowledgements, each under a sequence number; a FLUSH
// covers what was acknowledged before it was sent (Mark), and its successful reply frees those
// (Flushed). The payloads sit in a ring of bytes in the same order, so freeing is always from the
// front.
//
// A write the pool cannot take (too large, or the pool full) is not kept: the caller then sends a
// FLUSH of its own (WantsFlush). Should the connection break before a FLUSH covering that write was
// answered, the write may be lost: the next FLUSH after the reconnect fails (TakeLoss).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "server/nbd/protocol.h"

namespace blk::server::nbd {

class UnflushedWrites {
 public:
  // A replayed request's cookie has this bit in its slot half, above every request slot.
  static constexpr uint32_t kReplayCookieBit = 0x80000000u;

  // `pool_bytes` of payload; at most one entry per 4 KiB of it (at least 64). 0 keeps nothing:
  // every write is dropped (and a loss once the connection breaks before a FLUSH).
  explicit UnflushedWrites(size_t pool_bytes);

  // A request acknowledged: kCmdWrite (with its payload, or `data` null for a write of zeroes),
  // kCmdWriteZeroes or kCmdTrim. False when the pool could not keep it.
  bool Record(uint16_t command, uint64_t offset, uint32_t length, const void* data);
  // A FLUSH sent now covers every request acknowledged so far: its mark.
  uint64_t Mark() const { return next_seq_; }
  // A FLUSH sent at `mark` succeeded.
  void Flushed(uint64_t mark);
  // Half the pool is taken, or a write was dropped: a FLUSH would make room (or cover the drop).
  bool WantsFlush() const {
    return dropped_ || used_bytes_ > capacity_ / 2 || count_ > entries_.size() / 2;
  }

  // A new connection: the next FLUSH must fail when a dropped write was not yet covered, and every
  // kept request is replayed before any FLUSH is sent.
  void Reconnected();
  // Whether a write may have been lost; the first caller after a reconnect takes it (and fails its
  // FLUSH).
  bool TakeLoss() {
    const bool lost = lost_;
    lost_ = false;
    return lost;
  }

  // The replay after a reconnect, until every kept request was acknowledged again. Requests that
  // overlap go in separate batches, in their original order, each batch once the last one was
  // answered: an older write must not land after a newer one.
  bool replaying() const { return replay_next_ < replay_count_ || replay_in_flight_ > 0; }
  bool has_replay_to_send() const {
    return replay_next_ < replay_count_ && (batch_open_ || replay_in_flight_ == 0);
  }
  // Puts the next replay requests into `iov` (a header, and a write's payload), up to `capacity`
  // entries; `zeroes` is the payload of a write of zeroes.
  size_t GatherReplay(iovec* iov, size_t capacity, std::span<const uint8_t> zeroes);
  ReplyTarget* FindReplay(uint64_t cookie);
  // The reply of a replayed request arrived; a failed one may have lost its data (TakeLoss).
  void ReplayAnswered(uint64_t cookie);

  size_t count() const { return count_; }
  size_t used_bytes() const { return used_bytes_; }

 private:
  struct Entry {
    uint64_t seq = 0;
    uint64_t offset = 0;
    uint32_t length = 0;
    uint32_t data_at = 0;   // of the payload in pool_
    uint32_t consumed = 0;  // pool bytes it holds, with the pool's end it skipped to wrap
    uint16_t command = 0;
    bool has_data = false;
    bool in_flight = false;  // its replay was sent, the reply not yet parsed
    uint64_t cookie = 0;
    ReplyTarget target;
    uint8_t header[kRequestHeaderBytes] = {};
  };

  Entry& At(size_t index) { return entries_[(head_ + index) % entries_.size()]; }
  // Place for `bytes` of payload, or false.
  bool Allocate(uint32_t bytes, Entry& entry);
  bool OverlapsBatch(const Entry& entry);

  const size_t capacity_;
  std::unique_ptr<uint8_t[]> pool_;
  size_t pool_head_ = 0;  // where the oldest payload starts
  size_t pool_tail_ = 0;  // where the next one goes
  size_t used_bytes_ = 0;
  std::vector<Entry> entries_;  // ring, oldest first
  size_t head_ = 0;
  size_t count_ = 0;
  uint64_t next_seq_ = 0;
  bool dropped_ = false;  // a write not kept, acknowledged before dropped_seq_ + 1
  uint64_t dropped_seq_ = 0;
  bool lost_ = false;

  uint32_t replay_generation_ = 0;
  size_t replay_count_ = 0;  // entries to replay (all of them at the reconnect)
  size_t replay_next_ = 0;   // index of the next one to send
  size_t batch_start_ = 0;
  bool batch_open_ = false;
  size_t replay_in_flight_ = 0;
};

}  // namespace blk::server::nbd
