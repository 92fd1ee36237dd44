#include "agent/metrics/completion_locality_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "agent/metrics/bpf/completion_locality.skel.h"
#include "agent/metrics/bpf/completion_locality_abi.h"
#include "spdlog/spdlog.h"

namespace blk::agent {
namespace {

constexpr char kKernelBtf[] = "/sys/kernel/btf/vmlinux";

// libbpf's first warning of a load: the most specific reason it failed (later
// ones only say that the skeleton did not load).
std::string& FirstLibbpfWarning() {
  static std::string warning;
  return warning;
}

int LogLibbpf(libbpf_print_level level, const char* format, va_list args) {
  char line[512];
  vsnprintf(line, sizeof(line), format, args);
  std::string text(line);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (level == LIBBPF_WARN && FirstLibbpfWarning().empty()) FirstLibbpfWarning() = text;
  spdlog::debug("libbpf: {}", text);
  return 0;
}

std::string LoadFailure(int error) {
  if (error == EPERM || error == EACCES) {
    return "BPF is not allowed here (needs root, or CAP_BPF and CAP_PERFMON)";
  }
  std::string reason = absl::StrCat("cannot load the BPF program: ", std::strerror(error));
  if (!FirstLibbpfWarning().empty()) absl::StrAppend(&reason, " (", FirstLibbpfWarning(), ")");
  return reason;
}

}  // namespace

std::unique_ptr<CompletionLocalityProbe> CompletionLocalityProbe::Start() {
  if (::access(kKernelBtf, R_OK) != 0) {
    return Unavailable(absl::StrCat("the kernel has no BTF (", kKernelBtf,
                                    "): BPF CO-RE needs CONFIG_DEBUG_INFO_BTF"));
  }
  libbpf_set_print(LogLibbpf);
  FirstLibbpfWarning().clear();
  completion_locality_bpf* bpf = completion_locality_bpf__open_and_load();
  if (bpf == nullptr) return Unavailable(LoadFailure(errno));
  const int attached = completion_locality_bpf__attach(bpf);
  if (attached != 0) {
    completion_locality_bpf__destroy(bpf);
    return Unavailable(absl::StrCat("cannot attach to the block_rq_complete tracepoint: ",
                                    std::strerror(-attached)));
  }
  return std::unique_ptr<CompletionLocalityProbe>(
      new CompletionLocalityProbe(bpf, "counting block completions at tp_btf/block_rq_complete"));
}

std::unique_ptr<CompletionLocalityProbe> CompletionLocalityProbe::Unavailable(std::string reason) {
  return std::unique_ptr<CompletionLocalityProbe>(
      new CompletionLocalityProbe(nullptr, std::move(reason)));
}

CompletionLocalityProbe::~CompletionLocalityProbe() {
  if (bpf_ != nullptr) completion_locality_bpf__destroy(bpf_);
}

void CompletionLocalityProbe::DropCounts(const std::set<uint32_t>& devices) {
  if (devices.empty()) return;
  const int fd = bpf_map__fd(bpf_->maps.completions);
  std::vector<blk_locality_key> doomed;
  blk_locality_key key{};
  blk_locality_key next{};
  const blk_locality_key* previous = nullptr;
  while (bpf_map_get_next_key(fd, previous, &next) == 0) {
    if (devices.contains(next.dev)) doomed.push_back(next);
    key = next;
    previous = &key;
  }
  for (const blk_locality_key& gone : doomed) bpf_map_delete_elem(fd, &gone);
}

std::map<uint32_t, std::vector<CpuPairCount>> CompletionLocalityProbe::WatchAndRead(
    const std::set<uint32_t>& devices) {
  std::map<uint32_t, std::vector<CpuPairCount>> counts;
  if (bpf_ == nullptr) return counts;
  absl::MutexLock lock(&mutex_);
  const int watched_fd = bpf_map__fd(bpf_->maps.watched_devices);
  std::set<uint32_t> leaving;
  for (uint32_t dev : watched_) {
    if (!devices.contains(dev)) leaving.insert(dev);
  }
  for (uint32_t dev : leaving) {
    bpf_map_delete_elem(watched_fd, &dev);
    watched_.erase(dev);
  }
  // Counts left by an earlier device under the same number must not carry over.
  std::set<uint32_t> joining;
  for (uint32_t dev : devices) {
    if (!watched_.contains(dev)) joining.insert(dev);
  }
  DropCounts(leaving);
  DropCounts(joining);
  for (uint32_t dev : joining) {
    const uint8_t yes = 1;
    if (bpf_map_update_elem(watched_fd, &dev, &yes, BPF_ANY) != 0) {
      spdlog::warn("completion locality: cannot watch device {}:{}: {}", dev >> 20,
                   dev & ((1u << 20) - 1), std::strerror(errno));
      continue;
    }
    watched_.insert(dev);
  }

  const int fd = bpf_map__fd(bpf_->maps.completions);
  blk_locality_key key{};
  blk_locality_key next{};
  const blk_locality_key* previous = nullptr;
  while (bpf_map_get_next_key(fd, previous, &next) == 0) {
    uint64_t count = 0;
    if (watched_.contains(next.dev) && bpf_map_lookup_elem(fd, &next, &count) == 0) {
      counts[next.dev].push_back({next.submit_cpu, next.complete_cpu, count});
    }
    key = next;
    previous = &key;
  }
  for (uint32_t dev : watched_) counts[dev];  // a watched device without completions yet

  const uint64_t overflows = Overflows();
  if (overflows > reported_overflows_) {
    spdlog::warn("completion locality: {} completions not counted (the BPF count map is full)",
                 overflows);
    reported_overflows_ = overflows;
  }
  return counts;
}

uint64_t CompletionLocalityProbe::Overflows() const {
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return 0;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
  const uint32_t index = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(bpf_->maps.overflows), &index, per_cpu.data()) != 0) {
    return 0;
  }
  uint64_t total = 0;
  for (uint64_t lost : per_cpu) total += lost;
  return total;
}

}  // namespace blk::agent
