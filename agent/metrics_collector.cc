#include "agent/metrics_collector.h"

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <prometheus/metric_family.h>

#include <map>

#include "agent/version.h"
#include "blk/v1/volume_state_name.h"

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

std::string BackendLabel(const v1::Volume& volume) {
  switch (volume.backend_case()) {
    case v1::Volume::kNull:
      return "null";
    case v1::Volume::kFile:
      return "file";
    case v1::Volume::kNbd:
      return "nbd";
    case v1::Volume::BACKEND_NOT_SET:
      break;
  }
  return "none";
}

}  // namespace

std::vector<MetricFamily> MetricsCollector::Collect() const {
  std::vector<MetricFamily> families;

  MetricFamily build = Family("blk_agent_build_info", "The agent's version.", MetricType::Gauge);
  AddSample(build, {{"version", kAgentVersion}}, 1);
  families.push_back(std::move(build));

  MetricFamily node =
      Family("blk_node_ublk_info",
             "The kernel and the ublk features it offers (GET_FEATURES bits).", MetricType::Gauge);
  AddSample(node,
            {{"kernel_release", node_.kernel_release()},
             {"ublk_available", node_.ublk_available() ? "true" : "false"},
             {"ublk_features", absl::StrFormat("0x%x", node_.ublk_features())},
             {"ublk_feature_names", absl::StrJoin(node_.ublk_feature_names(), ",")}},
            1);
  families.push_back(std::move(node));

  MetricFamily bpf =
      Family("blk_node_bpf_locality_available",
             "1 when the BPF probe behind blk_block_completions_total runs.", MetricType::Gauge);
  AddSample(bpf, {}, node_.bpf_locality_available() ? 1 : 0);
  families.push_back(std::move(bpf));

  const std::vector<v1::Volume> volumes = volumes_.List();
  // Every state has a series, also at 0, so rate() and alerts see no gaps.
  std::map<std::string, int> by_state;
  for (int state = v1::VolumeState_MIN; state <= v1::VolumeState_MAX; ++state) {
    if (v1::VolumeState_IsValid(state)) {
      by_state[v1::VolumeStateName(static_cast<v1::VolumeState>(state))] = 0;
    }
  }
  MetricFamily info = Family("blk_volume_info", "One series per volume: its backend and device.",
                             MetricType::Gauge);
  MetricFamily size = Family("blk_volume_size_bytes", "The volume's size.", MetricType::Gauge);
  MetricFamily reconnects = Family(
      "blk_volume_backend_reconnects_total",
      "Times the volume's backend re-established its connection (NBD).", MetricType::Counter);
  MetricFamily errors =
      Family("blk_volume_backend_errors_total",
             "Backend faults (NBD): requests the server failed (server), connections dropped for a "
             "malformed reply (protocol), requests failed after io_timeout (timeout).",
             MetricType::Counter);
  for (const v1::Volume& volume : volumes) {
    ++by_state[v1::VolumeStateName(volume.status().state())];
    AddSample(info,
              {{"volume", volume.id()},
               {"backend", BackendLabel(volume)},
               {"device", volume.status().device_path()},
               {"state", v1::VolumeStateName(volume.status().state())}},
              1);
    AddSample(size, {{"volume", volume.id()}}, static_cast<double>(volume.size_bytes()));
    if (volume.has_nbd()) {
      AddSample(reconnects, {{"volume", volume.id()}},
                static_cast<double>(volume.status().reconnects()));
      const v1::VolumeStatus& status = volume.status();
      for (const auto& [kind, n] : {std::pair{"server", status.server_errors()},
                                    std::pair{"protocol", status.protocol_errors()},
                                    std::pair{"timeout", status.io_timeouts()}}) {
        AddSample(errors, {{"volume", volume.id()}, {"kind", kind}}, static_cast<double>(n));
      }
    }
  }
  MetricFamily count =
      Family("blk_volumes", "Volumes this agent owns, by state.", MetricType::Gauge);
  for (const auto& [state, n] : by_state) AddSample(count, {{"state", state}}, n);
  families.push_back(std::move(count));
  families.push_back(std::move(info));
  families.push_back(std::move(size));
  families.push_back(std::move(reconnects));
  families.push_back(std::move(errors));

  MetricFamily unknown =
      Family("blk_unknown_ublk_devices",
             "ublk devices on this node that no volume of this agent claims (left alone).",
             MetricType::Gauge);
  AddSample(unknown, {}, static_cast<double>(volumes_.UnknownKernelDevices().size()));
  families.push_back(std::move(unknown));

  if (completion_locality_ != nullptr) families.push_back(completion_locality_->Collect(volumes));
  return families;
}

}  // namespace blk::agent
