#include "server/ublk/placement.h"

#include "absl/strings/str_cat.h"
#include "server/ublk/cpu_list.h"

namespace blk::server {

absl::StatusOr<QueuePlacement> ParseQueuePlacement(std::string_view text) {
  QueuePlacement placement;
  if (text.empty() || text == "node") return placement;
  if (text == "hctx") {
    placement.kind = QueuePlacement::Kind::kHctx;
    return placement;
  }
  if (text == "spread") {
    placement.kind = QueuePlacement::Kind::kSpread;
    return placement;
  }
  absl::StatusOr<std::vector<int>> cpus = ParseCpuList(text);
  if (!cpus.ok()) {
    std::string message = absl::StrCat("'", std::string(text),
                                       "' is not hctx, node, spread or a CPU list such as 0,2-3");
    // What is wrong inside the list helps only when it was meant as one.
    if (text.front() >= '0' && text.front() <= '9') {
      absl::StrAppend(&message, " (", cpus.status().message(), ")");
    }
    return absl::InvalidArgumentError(message);
  }
  placement.kind = QueuePlacement::Kind::kCpus;
  placement.cpus = std::move(*cpus);
  return placement;
}

std::string FormatQueuePlacement(const QueuePlacement& placement) {
  switch (placement.kind) {
    case QueuePlacement::Kind::kHctx:
      return "hctx";
    case QueuePlacement::Kind::kNode:
      return "node";
    case QueuePlacement::Kind::kSpread:
      return "spread";
    case QueuePlacement::Kind::kCpus:
      break;
  }
  return FormatCpuList(placement.cpus);
}

namespace {

// The allowed CPUs of every NUMA node that holds one of `hctx_cpus`.
cpu_set_t NodeCpus(const cpu_set_t& hctx_cpus, const std::vector<int>& allowed,
                   const std::vector<cpu_set_t>& numa_nodes) {
  cpu_set_t nodes;
  CPU_ZERO(&nodes);
  for (const cpu_set_t& node : numa_nodes) {
    cpu_set_t shared;
    CPU_AND(&shared, &node, &hctx_cpus);
    if (CPU_COUNT(&shared) > 0) CPU_OR(&nodes, &nodes, &node);
  }
  cpu_set_t cpus = CpuSetOf(allowed);
  if (!numa_nodes.empty()) CPU_AND(&cpus, &cpus, &nodes);
  return cpus;
}

}  // namespace

cpu_set_t QueueThreadCpus(const QueuePlacement& placement, uint16_t queue,
                          const cpu_set_t& hctx_cpus, const std::vector<int>& allowed,
                          const std::vector<cpu_set_t>& numa_nodes) {
  switch (placement.kind) {
    case QueuePlacement::Kind::kHctx:
      return hctx_cpus;
    case QueuePlacement::Kind::kNode: {
      cpu_set_t cpus = NodeCpus(hctx_cpus, allowed, numa_nodes);
      return CPU_COUNT(&cpus) > 0 ? cpus : hctx_cpus;
    }
    case QueuePlacement::Kind::kSpread:
    case QueuePlacement::Kind::kCpus:
      break;
  }
  const std::vector<int>& ring =
      placement.kind == QueuePlacement::Kind::kCpus ? placement.cpus : allowed;
  if (ring.empty()) return hctx_cpus;
  return CpuSetOf({ring[queue % ring.size()]});
}

}  // namespace blk::server
