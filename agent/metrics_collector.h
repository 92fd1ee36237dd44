#pragma once

#include <prometheus/collectable.h>

#include "agent/volume_table.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

// The agent's Prometheus metrics, computed at scrape time from the volume
// table and the node, so nothing is counted on the I/O path.
class MetricsCollector final : public prometheus::Collectable {
 public:
  MetricsCollector(const VolumeTable& volumes, v1::GetNodeInfoResponse node)
      : volumes_(volumes), node_(std::move(node)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const VolumeTable& volumes_;
  const v1::GetNodeInfoResponse node_;
};

}  // namespace blk::agent
