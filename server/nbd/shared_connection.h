// One NBD connection for all the queues of a volume, for servers that do not advertise multi-conn
// (NBD proto.md: without NBD_FLAG_CAN_MULTI_CONN a FLUSH only covers writes of its own connection,
// so the queues cannot each have one).
//
// Queue 0's Backend owns the connection on its ring. Every other queue's backend
// (ForwardingBackend) writes the request into its slot here and forwards the slot index to
// queue 0's ring with IORING_OP_MSG_RING; queue 0 runs it like its own (pipelining, splits above
// the maximum payload, reconnect and resend, io_timeout) reading and writing the data straight in
// the forwarding queue's buffer, and posts the result back to that queue's ring with MSG_RING (a
// CqeKind::kResult CQE, the result in cqe->res), where that queue completes the tag. So no queue
// thread takes a lock or makes a blocking call per I/O: one SQE each way, submitted with the ring's
// regular submit_and_wait. The alternatives cost more per I/O: a lock around the socket serialises
// queue threads, and a connection thread adds a wake-up each way.
//
// Ordering: a queue publishes its ring fd when its backend attaches, before it can forward; queue
// 0 attaches first (queues start in order). Queue 0 must outlive the others' I/O: the device stops
// queue 0 last, after every other queue has had all its forwarded requests answered and ended.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "server/backend.h"

namespace blk::server::nbd {

struct SharedConnection {
  SharedConnection(uint16_t queue_count, uint16_t queue_depth)
      : queues(queue_count),
        depth(queue_depth),
        ring_fds(queue_count),
        rings(queue_count),
        requests(size_t{queue_count} * queue_depth) {
    for (std::atomic<int>& fd : ring_fds) fd.store(-1, std::memory_order_relaxed);
    for (std::atomic<const Ring*>& ring : rings) ring.store(nullptr, std::memory_order_relaxed);
  }

  uint32_t Slot(uint16_t queue, uint16_t tag) const { return uint32_t{queue} * depth + tag; }

  const uint16_t queues;
  const uint16_t depth;
  // Each queue's io_uring fd, set when its backend attaches; -1 before.
  std::vector<std::atomic<int>> ring_fds;
  // Each queue's Ring, set with its fd. Only names, to TSan, the hand-over of a tag's buffer back
  // to its queue with the kResult message (server/tsan_annotations.h).
  std::vector<std::atomic<const Ring*>> rings;
  // The request of each forwarding queue's tag, at Slot(queue, tag): written by that queue before
  // it forwards the slot, read by queue 0 when the message arrives (the MSG_RING orders the two;
  // TSan is told with HappensBefore/HappensAfter on the slot).
  std::vector<BlockIo> requests;
};

}  // namespace blk::server::nbd
