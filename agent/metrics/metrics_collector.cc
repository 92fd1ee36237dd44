#include "agent/metrics/metrics_collector.h"

#include <limits>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/devices/volume_io_limits.h"
#include "agent/version.h"
#include "blk/v1/volume_state_name.h"
#include "prometheus/metric_family.h"

namespace blk::agent {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

void AddSample(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  if (family.type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
}

ClientMetric::Histogram LatencyHistogram(const v1::VolumeStats& stats, const v1::IoOpStats& op) {
  ClientMetric::Histogram histogram;
  uint64_t cumulative = 0;
  for (int bucket = 0; bucket < op.latency_buckets_size(); ++bucket) {
    cumulative += op.latency_buckets(bucket);
    const double bound = bucket < stats.latency_bounds_seconds_size()
                             ? stats.latency_bounds_seconds(bucket)
                             : std::numeric_limits<double>::infinity();
    histogram.bucket.push_back({cumulative, bound});
  }
  histogram.sample_count = cumulative;
  histogram.sample_sum = op.latency_sum_seconds();
  return histogram;
}

// The series of every volume's I/O statistics (see SnapshotVolumeStats).
void AddIoStats(const std::vector<v1::VolumeStats>& all, std::vector<MetricFamily>& families) {
  MetricFamily ios = Family("blk_volume_ios_total", "Completed I/O requests, failed ones included.",
                            MetricType::Counter);
  MetricFamily bytes = Family("blk_volume_bytes_total", "Bytes transferred by successful requests.",
                              MetricType::Counter);
  MetricFamily errors =
      Family("blk_volume_errors_total", "Requests completed with an error.", MetricType::Counter);
  MetricFamily latency =
      Family("blk_volume_io_latency_seconds",
             "Time from the agent receiving a request to completing it.", MetricType::Histogram);
  MetricFamily inflight = Family("blk_volume_inflight_ios",
                                 "Requests the backend is working on now.", MetricType::Gauge);
  MetricFamily completions =
      Family("blk_queue_completions_total",
             "Completions by the queue thread on a CPU inside the queue's hctx CPU set (local) or "
             "outside it (remote).",
             MetricType::Counter);
  MetricFamily cpus =
      Family("blk_queue_cpus_info", "A queue's hctx CPU set and the CPUs its thread may run on.",
             MetricType::Gauge);
  for (const v1::VolumeStats& stats : all) {
    const std::string& volume = stats.volume_id();
    for (const v1::IoOpStats& op : stats.ops()) {
      AddSample(ios, {{"volume", volume}, {"op", op.op()}}, static_cast<double>(op.ios()));
      AddSample(bytes, {{"volume", volume}, {"op", op.op()}}, static_cast<double>(op.bytes()));
      AddSample(errors, {{"volume", volume}, {"op", op.op()}}, static_cast<double>(op.errors()));
      ClientMetric metric;
      metric.label = {{"volume", volume}, {"op", op.op()}};
      metric.histogram = LatencyHistogram(stats, op);
      latency.metric.push_back(std::move(metric));
    }
    AddSample(inflight, {{"volume", volume}}, static_cast<double>(stats.inflight_ios()));
    for (const v1::QueueStats& queue : stats.queues()) {
      const std::string id = std::to_string(queue.queue());
      AddSample(completions, {{"volume", volume}, {"queue", id}, {"locality", "local"}},
                static_cast<double>(queue.local_completions()));
      AddSample(completions, {{"volume", volume}, {"queue", id}, {"locality", "remote"}},
                static_cast<double>(queue.remote_completions()));
      AddSample(cpus,
                {{"volume", volume},
                 {"queue", id},
                 {"hctx_cpus", queue.hctx_cpus()},
                 {"thread_cpus", queue.thread_cpus()}},
                1);
    }
  }
  for (MetricFamily* family : {&ios, &bytes, &errors, &latency, &inflight, &completions, &cpus}) {
    families.push_back(std::move(*family));
  }
}

std::string BackendLabel(const v1::Volume& volume) {
  switch (volume.backend_case()) {
    case v1::Volume::kNull:
      return "null";
    case v1::Volume::kFile:
      return "file";
    case v1::Volume::kNbd:
      return "nbd";
    case v1::Volume::kNvme:
      return volume.nvme().has_fabric() ? "nvme-tcp" : "nvme";
    case v1::Volume::BACKEND_NOT_SET:
      break;
  }
  return "none";
}

// rq_affinity as the kernel has it, whether the kernel honours it for ublk,
// and where the queue threads run.
void AppendTuningFamilies(const std::vector<v1::Volume>& volumes,
                          std::vector<MetricFamily>& families) {
  MetricFamily rq_affinity = Family(
      "blk_volume_rq_affinity", "The device's queue/rq_affinity (0, 1, 2) as read back from sysfs.",
      MetricType::Gauge);
  MetricFamily redirected =
      Family("blk_volume_rq_affinity_redirected",
             "1 when the kernel completes the device's requests where rq_affinity says "
             "(UBLK_F_SUPPORT_RQ_AFFINITY), 0 when they complete on the queue thread's CPU.",
             MetricType::Gauge);
  MetricFamily placement = Family(
      "blk_volume_placement_info",
      "Where the volume's queue threads run: hctx, node, spread or a CPU list.", MetricType::Gauge);
  for (const v1::Volume& volume : volumes) {
    AddSample(placement, {{"volume", volume.id()}, {"placement", volume.placement()}}, 1);
    if (!volume.status().has_rq_affinity()) continue;  // no device to read it from
    AddSample(rq_affinity, {{"volume", volume.id()}}, volume.status().rq_affinity());
    AddSample(redirected, {{"volume", volume.id()}},
              volume.status().rq_affinity_redirected() ? 1 : 0);
  }
  families.push_back(std::move(rq_affinity));
  families.push_back(std::move(redirected));
  families.push_back(std::move(placement));
}

// The agent's version, the kernel's ublk features and whether the BPF probe runs.
void AppendNodeFamilies(const v1::GetNodeInfoResponse& node, std::vector<MetricFamily>& families) {
  MetricFamily build = Family("blk_agent_build_info", "The agent's version.", MetricType::Gauge);
  AddSample(build, {{"version", kAgentVersion}}, 1);
  families.push_back(std::move(build));

  MetricFamily ublk =
      Family("blk_node_ublk_info",
             "The kernel and the ublk features it offers (GET_FEATURES bits).", MetricType::Gauge);
  AddSample(ublk,
            {{"kernel_release", node.kernel_release()},
             {"ublk_available", node.ublk_available() ? "true" : "false"},
             {"ublk_features", absl::StrFormat("0x%x", node.ublk_features())},
             {"ublk_feature_names", absl::StrJoin(node.ublk_feature_names(), ",")}},
            1);
  families.push_back(std::move(ublk));

  MetricFamily bpf =
      Family("blk_node_bpf_locality_available",
             "1 when the BPF probe behind blk_block_completions_total runs.", MetricType::Gauge);
  AddSample(bpf, {}, node.bpf_locality_available() ? 1 : 0);
  families.push_back(std::move(bpf));
}

// How many volumes are in each state; every state has a series, also at 0, so rate() and alerts
// see no gaps.
void AppendStateCounts(const std::vector<v1::Volume>& volumes,
                       std::vector<MetricFamily>& families) {
  std::map<std::string, int> by_state;
  for (int state = v1::VolumeState_MIN; state <= v1::VolumeState_MAX; ++state) {
    if (v1::VolumeState_IsValid(state)) {
      by_state[v1::VolumeStateName(static_cast<v1::VolumeState>(state))] = 0;
    }
  }
  for (const v1::Volume& volume : volumes) ++by_state[v1::VolumeStateName(volume.status().state())];
  MetricFamily count =
      Family("blk_volumes", "Volumes this agent owns, by state.", MetricType::Gauge);
  for (const auto& [state, n] : by_state) AddSample(count, {{"state", state}}, n);
  families.push_back(std::move(count));
}

// Each volume's identity and geometry.
void AppendVolumeFamilies(const std::vector<v1::Volume>& volumes,
                          std::vector<MetricFamily>& families) {
  MetricFamily info =
      Family("blk_volume_info",
             "One series per volume: its backend, device and I/O command mode (batch or classic; "
             "empty without a device).",
             MetricType::Gauge);
  MetricFamily size = Family("blk_volume_size_bytes", "The volume's size.", MetricType::Gauge);
  MetricFamily queues = Family("blk_volume_queues", "The volume's ublk queues.", MetricType::Gauge);
  MetricFamily depth =
      Family("blk_volume_queue_depth", "Outstanding requests per queue.", MetricType::Gauge);
  for (const v1::Volume& volume : volumes) {
    AddSample(info,
              {{"volume", volume.id()},
               {"backend", BackendLabel(volume)},
               {"device", volume.status().device_path()},
               {"state", v1::VolumeStateName(volume.status().state())},
               {"io_mode", volume.status().io_mode()}},
              1);
    AddSample(size, {{"volume", volume.id()}}, static_cast<double>(volume.size_bytes()));
    AddSample(queues, {{"volume", volume.id()}}, volume.queues());
    AddSample(depth, {{"volume", volume.id()}}, volume.queue_depth());
  }
  for (MetricFamily* family : {&info, &size, &queues, &depth}) {
    families.push_back(std::move(*family));
  }
}

// What went wrong with each NBD volume's backend.
void AppendBackendFaultFamilies(const std::vector<v1::Volume>& volumes,
                                std::vector<MetricFamily>& families) {
  MetricFamily reconnects = Family(
      "blk_volume_backend_reconnects_total",
      "Times the volume's backend re-established its connection (NBD).", MetricType::Counter);
  MetricFamily errors = Family(
      "blk_volume_backend_errors_total",
      "Backend faults (NBD): requests the server failed (server), connections dropped for a "
      "malformed reply (protocol), requests failed after io_timeout (timeout), FLUSHes failed "
      "because a dropped connection may have lost acknowledged writes (unflushed_loss).",
      MetricType::Counter);
  for (const v1::Volume& volume : volumes) {
    if (!volume.has_nbd()) continue;
    const v1::VolumeStatus& status = volume.status();
    AddSample(reconnects, {{"volume", volume.id()}}, static_cast<double>(status.reconnects()));
    for (const auto& [kind, n] : {std::pair{"server", status.server_errors()},
                                  std::pair{"protocol", status.protocol_errors()},
                                  std::pair{"timeout", status.io_timeouts()},
                                  std::pair{"unflushed_loss", status.unflushed_losses()}}) {
      AddSample(errors, {{"volume", volume.id()}, {"kind", kind}}, static_cast<double>(n));
    }
  }
  families.push_back(std::move(reconnects));
  families.push_back(std::move(errors));
}

// Each NVMe/TCP volume's paths and the commands moved between them.
void AppendFabricFamilies(const std::vector<v1::Volume>& volumes,
                          std::vector<MetricFamily>& families) {
  MetricFamily live =
      Family("blk_volume_nvme_paths_live", "NVMe/TCP: the volume's paths whose controller is live.",
             MetricType::Gauge);
  MetricFamily total =
      Family("blk_volume_nvme_paths", "NVMe/TCP: the paths the volume names.", MetricType::Gauge);
  MetricFamily failovers =
      Family("blk_volume_nvme_failovers_total",
             "NVMe/TCP: commands resubmitted after failing for a path or transport reason.",
             MetricType::Counter);
  for (const v1::Volume& volume : volumes) {
    if (!volume.has_nvme() || !volume.nvme().has_fabric()) continue;
    const v1::VolumeStatus& status = volume.status();
    AddSample(live, {{"volume", volume.id()}}, status.nvme_paths_live());
    AddSample(total, {{"volume", volume.id()}}, status.nvme_paths_total());
    AddSample(failovers, {{"volume", volume.id()}}, static_cast<double>(status.nvme_failovers()));
  }
  for (MetricFamily* family : {&live, &total, &failovers}) families.push_back(std::move(*family));
}

// What each volume's limits allow, and what they held back (volumes with a device).
void AppendLimitFamilies(const std::vector<v1::Volume>& volumes,
                         std::vector<MetricFamily>& families) {
  MetricFamily requests = Family("blk_volume_throttled_requests_total",
                                 "Requests the volume's I/O limits held back before the backend "
                                 "got them.",
                                 MetricType::Counter);
  MetricFamily seconds =
      Family("blk_volume_throttled_seconds_total",
             "Time the held-back requests waited for their limits, summed.", MetricType::Counter);
  MetricFamily limit = Family("blk_volume_limit",
                              "A limit of the volume, per second: operations (read_iops, "
                              "write_iops, total_iops) or bytes (read_bytes, write_bytes, "
                              "total_bytes); only limits that are set.",
                              MetricType::Gauge);
  for (const v1::Volume& volume : volumes) {
    const v1::VolumeStatus& status = volume.status();
    if (status.device_path().empty()) continue;
    AddSample(requests, {{"volume", volume.id()}},
              static_cast<double>(status.throttled_requests()));
    AddSample(seconds, {{"volume", volume.id()}},
              static_cast<double>(status.throttled_nanoseconds()) / 1e9);
    const server::IoLimits limits = IoLimitsOf(volume.limits());
    for (const IoLimitKind& kind : kIoLimitKinds) {
      const uint64_t rate = (limits.*kind.limit).rate;
      if (rate == 0) continue;
      AddSample(limit, {{"volume", volume.id()}, {"kind", std::string(kind.name)}},
                static_cast<double>(rate));
    }
  }
  for (MetricFamily* family : {&requests, &seconds, &limit}) families.push_back(std::move(*family));
}

void AppendUnknownDevices(size_t unknown_devices, std::vector<MetricFamily>& families) {
  MetricFamily unknown =
      Family("blk_unknown_ublk_devices",
             "ublk devices on this node that no volume of this agent claims (left alone).",
             MetricType::Gauge);
  AddSample(unknown, {}, static_cast<double>(unknown_devices));
  families.push_back(std::move(unknown));
}

}  // namespace

std::vector<MetricFamily> MetricsCollector::Collect() const {
  std::vector<MetricFamily> families;
  AppendNodeFamilies(node_, families);
  const std::vector<v1::Volume> volumes = volumes_.List();
  AppendStateCounts(volumes, families);
  AppendVolumeFamilies(volumes, families);
  AppendBackendFaultFamilies(volumes, families);
  AppendFabricFamilies(volumes, families);
  AppendTuningFamilies(volumes, families);
  AppendLimitFamilies(volumes, families);
  AppendUnknownDevices(volumes_.UnknownKernelDevices().size(), families);
  AddIoStats(volumes_.AllStats(), families);
  if (completion_locality_ != nullptr) families.push_back(completion_locality_->Collect(volumes));
  return families;
}

}  // namespace blk::agent
