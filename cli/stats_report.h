#pragma once

#include <string>

#include "absl/time/time.h"
#include "blk/v1/volume.pb.h"

namespace blk::cli {

// What happened on a volume between two GetVolumeStats snapshots, as rates.
struct StatsInterval {
  double seconds = 0;
  double read_iops = 0;
  double write_iops = 0;
  double read_bytes_per_second = 0;
  double write_bytes_per_second = 0;
  double errors_per_second = 0;
  // Over every op's requests completed in the interval; 0 when there were none. p99 is
  // interpolated within its histogram bucket, like Prometheus' histogram_quantile; above the
  // largest bucket bound it is that bound.
  double avg_latency_seconds = 0;
  double p99_latency_seconds = 0;
  uint64_t inflight_ios = 0;  // at the end of the interval
  // Requests the volume's limits held back, per second, and how long each waited on average.
  double throttled_per_second = 0;
  double avg_throttle_wait_seconds = 0;
};

StatsInterval ComputeInterval(const blk::v1::VolumeStats& previous,
                              const blk::v1::VolumeStats& after, absl::Duration elapsed);

// iostat-like table: a header, then one line per interval stamped with the local time.
std::string RenderStatsHeader();
std::string RenderStatsLine(const StatsInterval& interval, absl::Time at);
// One JSON object per line (lowerCamelCase, like the API's JSON).
std::string RenderStatsJsonLine(const std::string& volume_id, const StatsInterval& interval,
                                absl::Time at);

}  // namespace blk::cli
