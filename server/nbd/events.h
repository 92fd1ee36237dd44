// The user_data of the NBD backend's own operations on its queue's ring. They all carry one tag
// that is never a real one (ublk depths are at most 4096): the event says which part of the
// backend the CQE is for, and the bits above it name the connection, outage or slot it concerns.
#pragma once

#include <cstdint>

#include "server/ublk/ring.h"

namespace blk::server::nbd {

inline constexpr uint16_t kConnectionTag = 0xFFFF;

enum Event : uint8_t {
  kRecv = 1,         // extra: the connection's generation (Transport)
  kSend = 2,         // extra: the connection's generation (Transport)
  kReconnected = 3,  // the Reconnector's eventfd polled readable (Transport)
  kTimer = 4,        // io_timeout; extra: the outage it was armed for (Transport)
  kForwarded = 5,    // a request from another queue; extra: its slot (Requests)
  kReplyFailed = 6,  // the MSG_RING of a forwarded request's result; extra: its slot (Requests)
};

inline constexpr uint64_t EventUserData(Event event, uint32_t extra) {
  return EncodeUserData(CqeKind::kBackend, kConnectionTag, event | (extra << 8));
}
inline constexpr Event EventOf(uint32_t extra) { return static_cast<Event>(extra & 0xFF); }
inline constexpr uint32_t EventDetailOf(uint32_t extra) { return extra >> 8; }

}  // namespace blk::server::nbd
