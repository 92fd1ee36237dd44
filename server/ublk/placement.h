// Which CPUs each queue thread of a device runs on.
#pragma once

#include <sched.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace blk::server {

struct QueuePlacement {
  enum class Kind {
    kHctx,    // each queue thread on its hctx CPU set, the CPUs whose I/O the queue receives
    kNode,    // each queue thread on every CPU of the NUMA nodes its hctx CPUs belong to
    kSpread,  // queue i on one CPU: the i-th (round robin) of the CPUs the agent may use
    kCpus,    // queue i on one CPU: the i-th (round robin) of `cpus`
  };
  Kind kind = Kind::kNode;  // the default
  std::vector<int> cpus;    // kCpus only: sorted, unique

  friend bool operator==(const QueuePlacement&, const QueuePlacement&) = default;
};

// "hctx", "node" or "" (the default: node), "spread", or a CPU list ("0,2-3"). Anything else is
// InvalidArgument.
absl::StatusOr<QueuePlacement> ParseQueuePlacement(std::string_view text);
// The canonical text: "hctx", "node", "spread" or a CPU list such as "0,2-3".
std::string FormatQueuePlacement(const QueuePlacement& placement);

// The CPUs queue `queue` runs on. `hctx_cpus` is the kernel's hctx set of the queue, `allowed` the
// CPUs the process may use, `numa_nodes` each NUMA node's CPUs (empty: one node of every CPU).
// Falls back to `hctx_cpus` where the placement leaves no allowed CPU.
cpu_set_t QueueThreadCpus(const QueuePlacement& placement, uint16_t queue,
                          const cpu_set_t& hctx_cpus, const std::vector<int>& allowed,
                          const std::vector<cpu_set_t>& numa_nodes);

}  // namespace blk::server
