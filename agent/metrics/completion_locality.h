#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace blk::agent {

// Where the block layer completed a request, relative to the CPU that
// submitted it: the same CPU, another CPU of an hctx whose CPU set holds both,
// or elsewhere (a cross-CPU, possibly cross-cache completion).
enum class CompletionLocality { kSameCpu, kSameHctxGroup, kOther };

// The label value of blk_block_completions_total: same_cpu, same_hctx_group, other.
const char* CompletionLocalityName(CompletionLocality locality);

// Sorted CPU numbers, as server::ParseCpuList returns them.
using CpuSet = std::vector<int>;

// An hctx's mq/<n>/cpu_list: blk-mq separates CPUs with ", ", and an hctx no
// CPU maps to has an empty list.
absl::StatusOr<CpuSet> ParseHctxCpuList(const std::string& text);

CompletionLocality ClassifyCompletion(uint32_t submit_cpu, uint32_t complete_cpu,
                                      const std::vector<CpuSet>& hctx_cpus);

// Completions counted per (submitting CPU, completing CPU), summed by locality.
struct LocalityTotals {
  uint64_t same_cpu = 0;
  uint64_t same_hctx_group = 0;
  uint64_t other = 0;
};

struct CpuPairCount {
  uint32_t submit_cpu = 0;
  uint32_t complete_cpu = 0;
  uint64_t count = 0;
};

LocalityTotals SumByLocality(const std::vector<CpuPairCount>& counts,
                             const std::vector<CpuSet>& hctx_cpus);

// A block device as sysfs describes it.
struct BlockDeviceTopology {
  uint32_t kernel_dev = 0;        // major << 20 | minor, as the kernel encodes dev_t
  std::vector<CpuSet> hctx_cpus;  // mq/<n>/cpu_list of every hardware queue
};

// Reads SYSFS_BLOCK/NAME/dev and SYSFS_BLOCK/NAME/mq/*/cpu_list (NAME like
// "ublkb0" or "nullb0"); an error names the device and what is missing.
absl::StatusOr<BlockDeviceTopology> ReadBlockDeviceTopology(
    const std::string& name, const std::string& sysfs_block = "/sys/block");

}  // namespace blk::agent
