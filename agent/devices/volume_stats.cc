#include "agent/devices/volume_stats.h"

#include <sched.h>

#include <array>

#include "server/ublk/cpu_list.h"

namespace blk::agent {
namespace {

struct Op {
  server::IoKind kind;
  const char* name;
};
constexpr std::array<Op, 5> kOps = {{{server::IoKind::kRead, "read"},
                                     {server::IoKind::kWrite, "write"},
                                     {server::IoKind::kFlush, "flush"},
                                     {server::IoKind::kDiscard, "discard"},
                                     {server::IoKind::kWriteZeroes, "write_zeroes"}}};

uint64_t Load(const std::atomic<uint64_t>& counter) {
  return counter.load(std::memory_order_relaxed);
}

// The CPUs the thread may run on; "" when it is gone.
std::string ThreadCpus(pid_t thread_id) {
  if (thread_id == 0) return "";
  cpu_set_t cpus;
  if (::sched_getaffinity(thread_id, sizeof(cpus), &cpus) != 0) return "";
  return server::FormatCpuList(server::CpusOf(cpus));
}

}  // namespace

v1::VolumeStats SnapshotVolumeStats(const std::string& volume_id, const server::Device& device) {
  v1::VolumeStats stats;
  stats.set_volume_id(volume_id);
  for (uint64_t bound : server::kLatencyBoundsNs) {
    stats.add_latency_bounds_seconds(static_cast<double>(bound) / 1e9);
  }
  for (const Op& op : kOps) {
    v1::IoOpStats* out = stats.add_ops();
    out->set_op(op.name);
    for (int bucket = 0; bucket < server::kLatencyBuckets; ++bucket) out->add_latency_buckets(0);
  }
  uint64_t inflight = 0;
  for (size_t q = 0; q < device.queue_count(); ++q) {
    const server::QueueStats& queue = device.queue_stats(q);
    const server::IoCounters& counters = queue.counters;
    for (size_t i = 0; i < kOps.size(); ++i) {
      const int k = static_cast<int>(kOps[i].kind);
      v1::IoOpStats& out = *stats.mutable_ops(static_cast<int>(i));
      // Read while the queue runs: ios may be a request or two ahead of the buckets; they agree
      // once the queue is idle.
      const uint64_t sum_ns = Load(counters.latency_sum_ns[k]);
      for (int bucket = 0; bucket < server::kLatencyBuckets; ++bucket) {
        out.set_latency_buckets(bucket,
                                out.latency_buckets(bucket) + Load(counters.latency[k][bucket]));
      }
      out.set_latency_sum_seconds(out.latency_sum_seconds() + static_cast<double>(sum_ns) / 1e9);
      out.set_ios(out.ios() + Load(counters.ios[k]));
      out.set_bytes(out.bytes() + Load(counters.bytes[k]));
      out.set_errors(out.errors() + Load(counters.errors[k]));
    }
    inflight += counters.inflight.load(std::memory_order_relaxed);
    v1::QueueStats* out = stats.add_queues();
    out->set_queue(static_cast<uint32_t>(q));
    out->set_hctx_cpus(server::FormatCpuList(server::CpusOf(queue.hctx_cpus)));
    out->set_thread_cpus(ThreadCpus(queue.thread_id.load(std::memory_order_relaxed)));
    out->set_local_completions(Load(counters.local_completions));
    out->set_remote_completions(Load(counters.remote_completions));
  }
  stats.set_inflight_ios(inflight);
  const server::ThrottleCounts throttled = device.throttle_counts();
  stats.set_throttled_requests(throttled.requests);
  stats.set_throttled_nanoseconds(throttled.wait_ns);
  return stats;
}

}  // namespace blk::agent
