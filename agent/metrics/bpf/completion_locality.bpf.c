// Kernel-side completion locality: for every request of a watched block device
// that completes, counts (device, submitting CPU, completing CPU).
//
// The submitting CPU is the request's software queue CPU (rq->mq_ctx->cpu):
// blk-mq takes the context of the CPU that allocates the request for a bio,
// and it is the CPU rq_affinity compares against when it decides whether to
// redirect a completion (blk_mq_complete_need_ipi). Reading it at completion
// needs no per-request state, so nothing leaks when a request never completes.
// The completing CPU is where block_rq_complete fires: blk_update_request or,
// for batched completions, blk_complete_request, after any redirection (ublk's
// batched commits fire both for one request; see count_completion).
//
// CO-RE: the few kernel fields used are declared here with
// preserve_access_index; libbpf relocates them against the running kernel's
// BTF, so the build host's kernel does not matter.
// The kernel's types first: libbpf's BPF-side headers build on them.
#include <linux/bpf.h>
#include <linux/types.h>

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "agent/metrics/bpf/completion_locality_abi.h"

struct gendisk {
  int major;
  int first_minor;
} __attribute__((preserve_access_index));

struct request_queue {
  struct gendisk* disk;
} __attribute__((preserve_access_index));

struct blk_mq_ctx {
  unsigned int cpu;
} __attribute__((preserve_access_index));

struct request {
  struct request_queue* q;
  struct blk_mq_ctx* mq_ctx;
  unsigned int cmd_flags;  // blk_opf_t: the operation in the low REQ_OP_BITS (8) bits
} __attribute__((preserve_access_index));

// enum req_op values, stable kernel ABI: the operations whose requests always carry bytes.
#define BLK_REQ_OP_MASK 0xffu
#define BLK_REQ_OP_READ 0u
#define BLK_REQ_OP_WRITE 1u
#define BLK_REQ_OP_DISCARD 3u
#define BLK_REQ_OP_WRITE_ZEROES 9u

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// Devices to count, by kernel dev_t (major << 20 | minor); userspace keeps it
// in sync with the volumes and the watched devices.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, BLK_LOCALITY_MAX_DEVICES);
  __type(key, __u32);
  __type(value, __u8);
} watched_devices SEC(".maps");

// Completions by (device, submit CPU, complete CPU). The completing CPU is
// part of the key, so each entry is only ever written on one CPU.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, BLK_LOCALITY_MAX_PAIRS);
  __type(key, struct blk_locality_key);
  __type(value, __u64);
} completions SEC(".maps");

// Completions not counted because `completions` was full.
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} overflows SEC(".maps");

SEC("tp_btf/block_rq_complete")
int BPF_PROG(count_completion, struct request* rq, int error, unsigned int nr_bytes) {
  // ublk's batched commits (UBLK_F_BATCH_IO, 7.x) end a request in blk_update_request, which
  // fires this tracepoint, and then again through blk_mq_end_request_batch ->
  // blk_complete_request, which fires it a second time with the bytes already consumed. A
  // request of an operation that always carries bytes, completed with none, is that echo. (A
  // flush has no bytes either way; one ended in such a batch is counted twice.)
  const unsigned int op = rq->cmd_flags & BLK_REQ_OP_MASK;
  if (nr_bytes == 0 && (op == BLK_REQ_OP_READ || op == BLK_REQ_OP_WRITE ||
                        op == BLK_REQ_OP_DISCARD || op == BLK_REQ_OP_WRITE_ZEROES)) {
    return 0;
  }
  struct gendisk* disk = rq->q->disk;
  if (!disk) return 0;
  __u32 dev = ((__u32)disk->major << 20) | (__u32)disk->first_minor;
  if (!bpf_map_lookup_elem(&watched_devices, &dev)) return 0;
  struct blk_mq_ctx* sw_queue = rq->mq_ctx;
  if (!sw_queue) return 0;

  struct blk_locality_key key = {
      .dev = dev,
      .submit_cpu = sw_queue->cpu,
      .complete_cpu = bpf_get_smp_processor_id(),
  };
  __u64* count = bpf_map_lookup_elem(&completions, &key);
  if (!count) {
    __u64 zero = 0;
    // BPF_NOEXIST: an interrupt on this CPU may have inserted it meanwhile.
    bpf_map_update_elem(&completions, &key, &zero, BPF_NOEXIST);
    count = bpf_map_lookup_elem(&completions, &key);
  }
  if (count) {
    __sync_fetch_and_add(count, 1);
  } else {
    __u32 index = 0;
    __u64* lost = bpf_map_lookup_elem(&overflows, &index);
    if (lost) __sync_fetch_and_add(lost, 1);
  }
  return 0;
}
