#include "server/nbd/durability.h"

#include <algorithm>

namespace blk::server::nbd {
namespace {

// Raises `value` to at least `floor`; returns what it held before.
uint64_t RaiseTo(std::atomic<uint64_t>& value, uint64_t floor) {
  uint64_t before = value.load(std::memory_order_acquire);
  while (before < floor && !value.compare_exchange_weak(before, floor, std::memory_order_acq_rel)) {
  }
  return before;
}

}  // namespace

Durability::Durability(uint16_t connections)
    : connections_(std::max<uint16_t>(connections, 1)),
      counters_(std::make_unique<Counters[]>(connections_)) {}

void Durability::Mark(uint64_t* marks) const {
  for (uint16_t c = 0; c < connections_; ++c) {
    marks[c] = counters_[c].acked.load(std::memory_order_acquire);
  }
}

void Durability::Flushed(const uint64_t* marks) {
  for (uint16_t c = 0; c < connections_; ++c) RaiseTo(counters_[c].flushed, marks[c]);
}

bool Durability::Dropped() {
  bool lost = false;
  for (uint16_t c = 0; c < connections_; ++c) {
    const uint64_t acked = counters_[c].acked.load(std::memory_order_acquire);
    // Settled either way: the writes up to `acked` are durable, or lost and reported now, once.
    lost = RaiseTo(counters_[c].flushed, acked) < acked || lost;
  }
  if (lost) {
    losses_.fetch_add(1, std::memory_order_acq_rel);
    unreported_.store(true, std::memory_order_release);
  }
  return lost;
}

}  // namespace blk::server::nbd
