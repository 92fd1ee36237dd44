#include "agent/metrics/completion_locality.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/ublk/cpu_list.h"

namespace blk::agent {
namespace {

absl::StatusOr<std::string> ReadSmallFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

}  // namespace

const char* CompletionLocalityName(CompletionLocality locality) {
  switch (locality) {
    case CompletionLocality::kSameCpu:
      return "same_cpu";
    case CompletionLocality::kSameHctxGroup:
      return "same_hctx_group";
    case CompletionLocality::kOther:
      break;
  }
  return "other";
}

absl::StatusOr<CpuSet> ParseHctxCpuList(const std::string& text) {
  std::string compact = absl::StrReplaceAll(text, {{" ", ""}, {"\n", ""}});
  if (compact.empty()) return CpuSet{};
  return server::ParseCpuList(compact);
}

CompletionLocality ClassifyCompletion(uint32_t submit_cpu, uint32_t complete_cpu,
                                      const std::vector<CpuSet>& hctx_cpus) {
  if (submit_cpu == complete_cpu) return CompletionLocality::kSameCpu;
  for (const CpuSet& cpus : hctx_cpus) {
    if (std::binary_search(cpus.begin(), cpus.end(), static_cast<int>(submit_cpu)) &&
        std::binary_search(cpus.begin(), cpus.end(), static_cast<int>(complete_cpu))) {
      return CompletionLocality::kSameHctxGroup;
    }
  }
  return CompletionLocality::kOther;
}

LocalityTotals SumByLocality(const std::vector<CpuPairCount>& counts,
                             const std::vector<CpuSet>& hctx_cpus) {
  LocalityTotals totals;
  for (const CpuPairCount& pair : counts) {
    switch (ClassifyCompletion(pair.submit_cpu, pair.complete_cpu, hctx_cpus)) {
      case CompletionLocality::kSameCpu:
        totals.same_cpu += pair.count;
        break;
      case CompletionLocality::kSameHctxGroup:
        totals.same_hctx_group += pair.count;
        break;
      case CompletionLocality::kOther:
        totals.other += pair.count;
        break;
    }
  }
  return totals;
}

absl::StatusOr<BlockDeviceTopology> ReadBlockDeviceTopology(const std::string& name,
                                                            const std::string& sysfs_block) {
  namespace fs = std::filesystem;
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a block device name"));
  }
  const fs::path device = fs::path(sysfs_block) / name;
  absl::StatusOr<std::string> dev = ReadSmallFile(device / "dev");
  if (!dev.ok()) return absl::NotFoundError(absl::StrCat("no block device ", name));
  std::pair<std::string, std::string> numbers = absl::StrSplit(*dev, ':');
  uint32_t major = 0;
  uint32_t minor = 0;
  if (!absl::SimpleAtoi(numbers.first, &major) || !absl::SimpleAtoi(numbers.second, &minor) ||
      minor >= (1u << 20) || major >= (1u << 12)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad device number '", *dev, "' in ", (device / "dev").string()));
  }
  BlockDeviceTopology topology;
  topology.kernel_dev = major << 20 | minor;
  std::error_code error;
  for (const fs::directory_entry& hctx : fs::directory_iterator(device / "mq", error)) {
    absl::StatusOr<std::string> list = ReadSmallFile(hctx.path() / "cpu_list");
    if (!list.ok()) continue;  // not an hctx directory
    absl::StatusOr<CpuSet> cpus = ParseHctxCpuList(*list);
    if (!cpus.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat((hctx.path() / "cpu_list").string(), ": ", cpus.status().message()));
    }
    topology.hctx_cpus.push_back(std::move(*cpus));
  }
  return topology;
}

}  // namespace blk::agent
