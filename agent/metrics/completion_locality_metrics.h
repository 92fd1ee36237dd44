#pragma once

#include <string>
#include <vector>

#include "agent/metrics/completion_locality_probe.h"
#include "blk/v1/volume.pb.h"
#include "prometheus/metric_family.h"

namespace blk::agent {

// blk_block_completions_total{device,volume,locality}: the probe's counts for
// every volume's device and every device named by --watch-block-devices
// (volume=""), classified against the device's hctx CPU sets at scrape.
class CompletionLocalityMetrics {
 public:
  CompletionLocalityMetrics(CompletionLocalityProbe& probe,
                            std::vector<std::string> watched_devices,
                            std::string sysfs_block = "/sys/block")
      : probe_(probe),
        watched_devices_(std::move(watched_devices)),
        sysfs_block_(std::move(sysfs_block)) {}

  prometheus::MetricFamily Collect(const std::vector<v1::Volume>& volumes) const;

 private:
  CompletionLocalityProbe& probe_;
  const std::vector<std::string> watched_devices_;
  const std::string sysfs_block_;
};

// "nullb0" from "nullb0" or "/dev/nullb0"; an error for anything else.
absl::StatusOr<std::string> BlockDeviceName(const std::string& device);

}  // namespace blk::agent
