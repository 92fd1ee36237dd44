#include "cli/stats_report.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"

namespace blk::cli {
namespace {

const blk::v1::IoOpStats* FindOp(const blk::v1::VolumeStats& stats, const std::string& name) {
  for (const blk::v1::IoOpStats& op : stats.ops()) {
    if (op.op() == name) return &op;
  }
  return nullptr;
}

// A device taken over by a restarted agent counts from 0 again.
bool CountersRestarted(const blk::v1::VolumeStats& before, const blk::v1::VolumeStats& after) {
  for (const blk::v1::IoOpStats& op : after.ops()) {
    const blk::v1::IoOpStats* old = FindOp(before, op.op());
    if (old != nullptr && old->ios() > op.ios()) return true;
  }
  return false;
}

double Quantile(double q, const std::vector<uint64_t>& buckets,
                const google::protobuf::RepeatedField<double>& bounds) {
  uint64_t total = 0;
  for (uint64_t n : buckets) total += n;
  if (total == 0) return 0;
  const double rank = q * static_cast<double>(total);
  uint64_t below = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (static_cast<double>(below + buckets[b]) >= rank && buckets[b] > 0) {
      if (b >= static_cast<size_t>(bounds.size())) break;
      const double lower = b == 0 ? 0 : bounds[static_cast<int>(b) - 1];
      const double upper = bounds[static_cast<int>(b)];
      const double within = (rank - static_cast<double>(below)) / static_cast<double>(buckets[b]);
      return lower + (upper - lower) * within;
    }
    below += buckets[b];
  }
  return bounds.empty() ? 0 : bounds[bounds.size() - 1];
}

std::string Latency(double seconds) {
  if (seconds < 1e-3) return absl::StrFormat("%.0fus", seconds * 1e6);
  if (seconds < 1) return absl::StrFormat("%.1fms", seconds * 1e3);
  return absl::StrFormat("%.2fs", seconds);
}

}  // namespace

StatsInterval ComputeInterval(const blk::v1::VolumeStats& previous,
                              const blk::v1::VolumeStats& after, absl::Duration elapsed) {
  const blk::v1::VolumeStats& before =
      CountersRestarted(previous, after) ? blk::v1::VolumeStats::default_instance() : previous;
  StatsInterval interval;
  interval.seconds = absl::ToDoubleSeconds(elapsed);
  interval.inflight_ios = after.inflight_ios();
  if (interval.seconds <= 0) return interval;
  std::vector<uint64_t> buckets(static_cast<size_t>(after.latency_bounds_seconds_size()) + 1, 0);
  uint64_t ios = 0;
  uint64_t errors = 0;
  double latency_sum = 0;
  for (const blk::v1::IoOpStats& op : after.ops()) {
    const blk::v1::IoOpStats* old = FindOp(before, op.op());
    if (old == nullptr) old = &blk::v1::IoOpStats::default_instance();
    const uint64_t op_ios = op.ios() - old->ios();
    const uint64_t op_bytes = op.bytes() - old->bytes();
    ios += op_ios;
    errors += op.errors() - old->errors();
    latency_sum += op.latency_sum_seconds() - old->latency_sum_seconds();
    for (int b = 0; b < op.latency_buckets_size() && b < static_cast<int>(buckets.size()); ++b) {
      const uint64_t was = b < old->latency_buckets_size() ? old->latency_buckets(b) : 0;
      buckets[static_cast<size_t>(b)] += op.latency_buckets(b) - was;
    }
    if (op.op() == "read") {
      interval.read_iops = static_cast<double>(op_ios) / interval.seconds;
      interval.read_bytes_per_second = static_cast<double>(op_bytes) / interval.seconds;
    } else if (op.op() == "write") {
      interval.write_iops = static_cast<double>(op_ios) / interval.seconds;
      interval.write_bytes_per_second = static_cast<double>(op_bytes) / interval.seconds;
    }
  }
  interval.errors_per_second = static_cast<double>(errors) / interval.seconds;
  if (ios > 0) interval.avg_latency_seconds = std::max(0.0, latency_sum) / static_cast<double>(ios);
  interval.p99_latency_seconds = Quantile(0.99, buckets, after.latency_bounds_seconds());
  if (after.throttled_requests() >= before.throttled_requests() &&
      after.throttled_nanoseconds() >= before.throttled_nanoseconds()) {
    const uint64_t held = after.throttled_requests() - before.throttled_requests();
    interval.throttled_per_second = static_cast<double>(held) / interval.seconds;
    if (held > 0) {
      interval.avg_throttle_wait_seconds =
          static_cast<double>(after.throttled_nanoseconds() - before.throttled_nanoseconds()) /
          1e9 / static_cast<double>(held);
    }
  }
  return interval;
}

std::string RenderStatsHeader() {
  return absl::StrFormat("%-8s %10s %10s %9s %9s %8s %9s %9s %8s %9s %9s\n", "TIME", "r/s", "w/s",
                         "rMB/s", "wMB/s", "err/s", "avg_lat", "p99_lat", "inflight", "thr/s",
                         "thr_wait");
}

std::string RenderStatsLine(const StatsInterval& interval, absl::Time at) {
  constexpr double kMB = 1024 * 1024;
  return absl::StrFormat(
      "%-8s %10.1f %10.1f %9.2f %9.2f %8.1f %9s %9s %8d %9.1f %9s\n",
      absl::FormatTime("%H:%M:%S", at, absl::LocalTimeZone()), interval.read_iops,
      interval.write_iops, interval.read_bytes_per_second / kMB,
      interval.write_bytes_per_second / kMB, interval.errors_per_second,
      Latency(interval.avg_latency_seconds), Latency(interval.p99_latency_seconds),
      interval.inflight_ios, interval.throttled_per_second,
      Latency(interval.avg_throttle_wait_seconds));
}

std::string RenderStatsJsonLine(const std::string& volume_id, const StatsInterval& interval,
                                absl::Time at) {
  return absl::StrFormat(
      "{\"volumeId\":\"%s\",\"time\":\"%s\",\"seconds\":%.6g,\"readIops\":%.6g,"
      "\"writeIops\":%.6g,\"readBytesPerSecond\":%.6g,\"writeBytesPerSecond\":%.6g,"
      "\"errorsPerSecond\":%.6g,\"avgLatencySeconds\":%.6g,\"p99LatencySeconds\":%.6g,"
      "\"inflightIos\":%d,\"throttledPerSecond\":%.6g,\"avgThrottleWaitSeconds\":%.6g}\n",
      volume_id, absl::FormatTime(absl::RFC3339_full, at, absl::UTCTimeZone()), interval.seconds,
      interval.read_iops, interval.write_iops, interval.read_bytes_per_second,
      interval.write_bytes_per_second, interval.errors_per_second, interval.avg_latency_seconds,
      interval.p99_latency_seconds, interval.inflight_ios, interval.throttled_per_second,
      interval.avg_throttle_wait_seconds);
}

}  // namespace blk::cli
