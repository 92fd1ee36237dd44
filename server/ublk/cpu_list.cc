#include "server/ublk/cpu_list.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace blk::server {
namespace {

absl::StatusOr<int> ParseCpu(absl::string_view item, absl::string_view text) {
  int cpu = -1;
  // SimpleAtoi accepts a sign and surrounding blanks; a CPU list has neither.
  const bool digits_only = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  if (!digits_only || !absl::SimpleAtoi(text, &cpu) || cpu >= CPU_SETSIZE) {
    return absl::InvalidArgumentError(absl::StrCat("'", item, "' is not a CPU number 0..",
                                                   CPU_SETSIZE - 1, " or a range such as 2-3"));
  }
  return cpu;
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("the CPU list is empty");
  std::vector<int> cpus;
  for (absl::string_view item : absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    const std::vector<absl::string_view> bounds = absl::StrSplit(item, absl::MaxSplits('-', 1));
    absl::StatusOr<int> first = ParseCpu(item, bounds[0]);
    if (!first.ok()) return first.status();
    absl::StatusOr<int> last = bounds.size() == 2 ? ParseCpu(item, bounds[1]) : first;
    if (!last.ok()) return last.status();
    if (*last < *first) {
      return absl::InvalidArgumentError(absl::StrCat("'", item, "' is a reversed range"));
    }
    for (int cpu = *first; cpu <= *last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string text;
  for (size_t i = 0; i < sorted.size();) {
    size_t end = i;
    while (end + 1 < sorted.size() && sorted[end + 1] == sorted[end] + 1) ++end;
    if (!text.empty()) text += ',';
    absl::StrAppend(&text, sorted[i]);
    if (end > i) absl::StrAppend(&text, "-", sorted[end]);
    i = end + 1;
  }
  return text;
}

std::vector<int> CpusOf(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

cpu_set_t CpuSetOf(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  }
  return set;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(::getpid(), sizeof(set), &set) != 0) return {};
  return CpusOf(set);
}

}  // namespace blk::server
