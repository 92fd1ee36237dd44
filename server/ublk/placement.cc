#include "server/ublk/placement.h"

#include "absl/strings/str_cat.h"
#include "server/ublk/cpu_list.h"

namespace blk::server {

absl::StatusOr<QueuePlacement> ParseQueuePlacement(std::string_view text) {
  QueuePlacement placement;
  if (text.empty() || text == "hctx") return placement;
  if (text == "spread") {
    placement.kind = QueuePlacement::Kind::kSpread;
    return placement;
  }
  absl::StatusOr<std::vector<int>> cpus = ParseCpuList(text);
  if (!cpus.ok()) {
    std::string message =
        absl::StrCat("'", std::string(text), "' is not hctx, spread or a CPU list such as 0,2-3");
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
    case QueuePlacement::Kind::kSpread:
      return "spread";
    case QueuePlacement::Kind::kCpus:
      break;
  }
  return FormatCpuList(placement.cpus);
}

cpu_set_t QueueThreadCpus(const QueuePlacement& placement, uint16_t queue,
                          const cpu_set_t& hctx_cpus, const std::vector<int>& allowed) {
  const std::vector<int>& ring =
      placement.kind == QueuePlacement::Kind::kCpus ? placement.cpus : allowed;
  if (placement.kind == QueuePlacement::Kind::kHctx || ring.empty()) return hctx_cpus;
  return CpuSetOf({ring[queue % ring.size()]});
}

}  // namespace blk::server
