#include "server/nbd/unflushed_writes.h"

#include <algorithm>
#include <cstring>

namespace blk::server::nbd {
namespace {

constexpr size_t kBytesPerEntry = 4096;
constexpr size_t kMinEntries = 64;

}  // namespace

UnflushedWrites::UnflushedWrites(size_t pool_bytes)
    : capacity_(pool_bytes),
      // Not zeroed: the pages are touched only once writes fill them.
      pool_(new uint8_t[std::max<size_t>(pool_bytes, 1)]),
      entries_(std::max(kMinEntries, pool_bytes / kBytesPerEntry)) {}

bool UnflushedWrites::Allocate(uint32_t bytes, Entry& entry) {
  if (used_bytes_ == 0) pool_head_ = pool_tail_ = 0;
  if (used_bytes_ == 0 || pool_tail_ > pool_head_) {
    // Free: [tail, capacity) and [0, head).
    if (capacity_ - pool_tail_ >= bytes) {
      entry.data_at = static_cast<uint32_t>(pool_tail_);
      entry.consumed = bytes;
    } else if (pool_head_ >= bytes) {
      entry.data_at = 0;
      entry.consumed = static_cast<uint32_t>(capacity_ - pool_tail_) + bytes;
    } else {
      return false;
    }
  } else if (pool_head_ - pool_tail_ >= bytes) {  // wrapped: free is [tail, head)
    entry.data_at = static_cast<uint32_t>(pool_tail_);
    entry.consumed = bytes;
  } else {
    return false;
  }
  pool_tail_ = entry.data_at + bytes;
  used_bytes_ += entry.consumed;
  return true;
}

bool UnflushedWrites::Record(uint16_t command, uint64_t offset, uint32_t length, const void* data) {
  const uint64_t seq = next_seq_++;
  const bool has_data = command == kCmdWrite && data != nullptr;
  Entry& entry = entries_[(head_ + count_) % entries_.size()];
  if (count_ == entries_.size() || (has_data && !Allocate(length, entry))) {
    dropped_ = true;
    dropped_seq_ = seq;
    return false;
  }
  entry.seq = seq;
  entry.offset = offset;
  entry.length = length;
  entry.command = command;
  entry.has_data = has_data;
  entry.in_flight = false;
  if (has_data) {
    std::memcpy(pool_.get() + entry.data_at, data, length);
  } else {
    entry.consumed = 0;
  }
  ++count_;
  return true;
}

void UnflushedWrites::Flushed(uint64_t mark) {
  if (dropped_ && dropped_seq_ < mark) dropped_ = false;
  // Nothing is flushed while a replay runs (it holds every other request back).
  if (replaying()) return;
  while (count_ > 0 && entries_[head_].seq < mark) {
    const Entry& entry = entries_[head_];
    if (entry.has_data) {
      used_bytes_ -= entry.consumed;
      pool_head_ = entry.data_at + entry.length;
    }
    head_ = (head_ + 1) % entries_.size();
    --count_;
  }
}

void UnflushedWrites::Reconnected() {
  if (dropped_) lost_ = true;
  dropped_ = false;
  ++replay_generation_;
  replay_count_ = count_;
  replay_next_ = 0;
  replay_in_flight_ = 0;
  batch_open_ = false;
  for (size_t i = 0; i < count_; ++i) At(i).in_flight = false;
}

bool UnflushedWrites::OverlapsBatch(const Entry& entry) {
  for (size_t i = batch_start_; i < replay_next_; ++i) {
    const Entry& other = At(i);
    if (entry.offset < other.offset + other.length && other.offset < entry.offset + entry.length) {
      return true;
    }
  }
  return false;
}

size_t UnflushedWrites::GatherReplay(iovec* iov, size_t capacity, std::span<const uint8_t> zeroes) {
  size_t n = 0;
  if (!batch_open_ && replay_in_flight_ == 0) {
    batch_open_ = true;
    batch_start_ = replay_next_;
  }
  while (batch_open_ && replay_next_ < replay_count_ && n + 2 <= capacity) {
    const size_t index = replay_next_;
    Entry& entry = At(index);
    if (OverlapsBatch(entry)) {
      batch_open_ = false;
      break;
    }
    const auto position = static_cast<uint32_t>((head_ + index) % entries_.size());
    entry.cookie = (uint64_t{replay_generation_} << 32) | kReplayCookieBit | position;
    entry.target = ReplyTarget{};
    entry.target.command = entry.command;
    entry.target.offset = entry.offset;
    entry.target.length = entry.length;
    EncodeRequest(entry.header, 0, entry.command, entry.cookie, entry.offset, entry.length);
    iov[n++] = {entry.header, sizeof(entry.header)};
    if (entry.command == kCmdWrite) {
      // A write of zeroes is never longer than the zero buffer (it was sent from it).
      const uint8_t* payload = entry.has_data ? pool_.get() + entry.data_at : zeroes.data();
      iov[n++] = {const_cast<uint8_t*>(payload), entry.length};
    }
    entry.in_flight = true;
    ++replay_in_flight_;
    ++replay_next_;
  }
  if (replay_next_ == replay_count_) batch_open_ = false;
  return n;
}

ReplyTarget* UnflushedWrites::FindReplay(uint64_t cookie) {
  const auto position = static_cast<uint32_t>(cookie) & ~kReplayCookieBit;
  if (position >= entries_.size()) return nullptr;
  Entry& entry = entries_[position];
  if (!entry.in_flight || entry.cookie != cookie) return nullptr;
  return &entry.target;
}

void UnflushedWrites::ReplayAnswered(uint64_t cookie) {
  Entry& entry = entries_[static_cast<uint32_t>(cookie) & ~kReplayCookieBit];
  entry.in_flight = false;
  --replay_in_flight_;
  // The data did not reach the server again: what the application believes durable may not be.
  if (entry.target.nbd_error != 0) lost_ = true;
}

}  // namespace blk::server::nbd
