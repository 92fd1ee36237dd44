// libFuzzer target: CPU lists in the kernel's format (server/ublk/cpu_list), read from
// --cpus-style flags, volume specs and /sys. An accepted list is sorted, without duplicates,
// within CPU_SETSIZE, and prints to a list that parses back to the same CPUs; any set of CPUs
// prints to a list that parses back to it.
#include <sched.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "server/ublk/cpu_list.h"

namespace {

void CheckRoundTrip(const std::vector<int>& cpus) {
  const std::string text = blk::server::FormatCpuList(cpus);
  if (cpus.empty()) {
    if (!text.empty() || blk::server::ParseCpuList(text).ok()) abort();
    return;
  }
  absl::StatusOr<std::vector<int>> again = blk::server::ParseCpuList(text);
  if (!again.ok() || *again != cpus) abort();
  if (blk::server::CpusOf(blk::server::CpuSetOf(cpus)) != cpus) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The bytes as a set of CPUs, two bytes a CPU.
  std::vector<int> set;
  for (size_t i = 0; i + 1 < size; i += 2)
    set.push_back(((data[i] << 8) | data[i + 1]) % CPU_SETSIZE);
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  CheckRoundTrip(set);

  // The bytes as a list.
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<int>> cpus = blk::server::ParseCpuList(text);
  if (!cpus.ok()) {
    if (cpus.status().message().empty()) abort();
    return 0;
  }
  if (cpus->empty() || !std::is_sorted(cpus->begin(), cpus->end())) abort();
  if (std::adjacent_find(cpus->begin(), cpus->end()) != cpus->end()) abort();
  if (cpus->front() < 0 || cpus->back() >= CPU_SETSIZE) abort();
  CheckRoundTrip(*cpus);
  return 0;
}
