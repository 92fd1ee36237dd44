#pragma once

#include "agent/metrics/completion_locality_metrics.h"
#include "agent/volumes/volume_table.h"
#include "blk/v1/volume.pb.h"
#include "prometheus/collectable.h"

namespace blk::agent {

// The agent's Prometheus metrics, computed at scrape time from the volume
// table and the node, so nothing is counted on the I/O path.
class MetricsCollector final : public prometheus::Collectable {
 public:
  // `completion_locality` may be null (then blk_block_completions_total is not exported).
  MetricsCollector(const VolumeTable& volumes, v1::GetNodeInfoResponse node,
                   const CompletionLocalityMetrics* completion_locality = nullptr)
      : volumes_(volumes), node_(std::move(node)), completion_locality_(completion_locality) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const VolumeTable& volumes_;
  const v1::GetNodeInfoResponse node_;
  const CompletionLocalityMetrics* const completion_locality_;
};

}  // namespace blk::agent
