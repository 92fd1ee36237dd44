#pragma once

#include <sched.h>
#include <sys/types.h>

#include <atomic>

#include "server/ublk/io_counters.h"

namespace blk::server {

// What one queue publishes for observers (metrics, the stats RPC). Owned by the Device rather than
// the Queue, so a reader never waits for a queue to stop and can still read it after it ended.
struct QueueStats {
  IoCounters counters;
  // Set before the queue starts, constant after: the CPUs whose I/O the kernel sends to this
  // queue, and those its thread is pinned to (see QueuePlacement).
  cpu_set_t hctx_cpus{};
  cpu_set_t thread_cpus{};
  std::atomic<pid_t> thread_id{0};  // the queue thread's id while it runs, else 0
};

}  // namespace blk::server
