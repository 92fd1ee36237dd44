#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/metrics/completion_locality.h"

struct completion_locality_bpf;

namespace blk::agent {

// The kernel side of completion locality: a BPF program on the block layer's
// completion tracepoint counts, per watched device, where each request was
// submitted and where it completed (agent/metrics/bpf/completion_locality.bpf.c).
// Nothing runs in userspace per I/O; the maps are read when asked.
// Optional at run time: where it cannot load (no root, no BTF, BPF not
// allowed) it stays unavailable and says why.
class CompletionLocalityProbe {
 public:
  // Loads and attaches the program.
  static std::unique_ptr<CompletionLocalityProbe> Start();
  // An unavailable probe with `reason` as its message (e.g. disabled by a flag).
  static std::unique_ptr<CompletionLocalityProbe> Unavailable(std::string reason);
  ~CompletionLocalityProbe();
  CompletionLocalityProbe(const CompletionLocalityProbe&) = delete;
  CompletionLocalityProbe& operator=(const CompletionLocalityProbe&) = delete;

  bool available() const { return bpf_ != nullptr; }
  // What was loaded, or why nothing was.
  const std::string& message() const { return message_; }

  // Makes `devices` (kernel dev_t values, major << 20 | minor) the counted set:
  // a device that joins starts from zero, one that leaves has its counts dropped.
  // Returns the counts of every device in the set. Empty when unavailable.
  std::map<uint32_t, std::vector<CpuPairCount>> WatchAndRead(const std::set<uint32_t>& devices)
      ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  CompletionLocalityProbe(completion_locality_bpf* bpf, std::string message)
      : bpf_(bpf), message_(std::move(message)) {}
  void DropCounts(const std::set<uint32_t>& devices) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Completions not counted because the count map was full.
  uint64_t Overflows() const;

  completion_locality_bpf* const bpf_;
  const std::string message_;
  absl::Mutex mutex_;
  std::set<uint32_t> watched_ ABSL_GUARDED_BY(mutex_);
  uint64_t reported_overflows_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace blk::agent
