#include "agent/metrics/completion_locality_metrics.h"

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace blk::agent {

absl::StatusOr<std::string> BlockDeviceName(const std::string& device) {
  absl::string_view name = device;
  absl::ConsumePrefix(&name, "/dev/");
  if (name.empty() || name == "." || name == ".." || absl::StrContains(name, '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", device, "' is not a block device name like nvme0n1 or /dev/nvme0n1"));
  }
  return std::string(name);
}

prometheus::MetricFamily CompletionLocalityMetrics::Collect(
    const std::vector<v1::Volume>& volumes) const {
  prometheus::MetricFamily family;
  family.name = "blk_block_completions_total";
  family.help =
      "Requests the block layer completed, by where relative to the CPU that submitted them "
      "(BPF on block_rq_complete): same_cpu, same_hctx_group (another CPU of the submitting "
      "CPU's hardware queue) or other. Counted from the first scrape that sees the device.";
  family.type = prometheus::MetricType::Counter;
  if (!probe_.available()) return family;

  struct Watched {
    std::string device;
    std::string volume;
    std::vector<CpuSet> hctx_cpus;
  };
  std::map<uint32_t, Watched> by_dev;
  auto watch = [&](const std::string& name, const std::string& volume) {
    absl::StatusOr<BlockDeviceTopology> topology = ReadBlockDeviceTopology(name, sysfs_block_);
    if (!topology.ok()) return;  // not (or no longer) there: nothing to count
    by_dev.try_emplace(topology->kernel_dev, Watched{name, volume, std::move(topology->hctx_cpus)});
  };
  for (const v1::Volume& volume : volumes) {
    absl::StatusOr<std::string> name = BlockDeviceName(volume.status().device_path());
    if (name.ok()) watch(*name, volume.id());
  }
  for (const std::string& name : watched_devices_) watch(name, "");

  std::set<uint32_t> devices;
  for (const auto& [dev, watched] : by_dev) devices.insert(dev);
  for (const auto& [dev, counts] : probe_.WatchAndRead(devices)) {
    auto watched = by_dev.find(dev);
    if (watched == by_dev.end()) continue;
    const LocalityTotals totals = SumByLocality(counts, watched->second.hctx_cpus);
    for (const auto& [locality, value] :
         {std::pair{CompletionLocality::kSameCpu, totals.same_cpu},
          {CompletionLocality::kSameHctxGroup, totals.same_hctx_group},
          {CompletionLocality::kOther, totals.other}}) {
      prometheus::ClientMetric metric;
      metric.label = {{"device", "/dev/" + watched->second.device},
                      {"volume", watched->second.volume},
                      {"locality", CompletionLocalityName(locality)}};
      metric.counter.value = static_cast<double>(value);
      family.metric.push_back(std::move(metric));
    }
  }
  return family;
}

}  // namespace blk::agent
