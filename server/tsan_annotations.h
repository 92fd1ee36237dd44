// Orderings TSan cannot see, told to it explicitly: one thread hands memory to another through
// the kernel (an IORING_OP_MSG_RING from one ring to another's), which TSan does not instrument.
// No-ops unless built with -fsanitize=thread.
#pragma once

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BLK_TSAN 1
#endif
#endif
#if !defined(BLK_TSAN) && defined(__SANITIZE_THREAD__)
#define BLK_TSAN 1
#endif

#ifdef BLK_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace blk::server {

// Everything this thread did so far happens before what another thread does after its
// HappensAfter(addr). `addr` only names the hand-over; nothing is read or written there.
inline void HappensBefore([[maybe_unused]] const void* addr) {
#ifdef BLK_TSAN
  __tsan_release(const_cast<void*>(addr));
#endif
}

inline void HappensAfter([[maybe_unused]] const void* addr) {
#ifdef BLK_TSAN
  __tsan_acquire(const_cast<void*>(addr));
#endif
}

}  // namespace blk::server
