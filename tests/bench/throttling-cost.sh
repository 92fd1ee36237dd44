#!/usr/bin/env bash
# Usage: tests/bench/throttling-cost.sh BUILD_DIR
#
# What a volume without limits pays for the limits feature, per request, on this host:
# BUILD_DIR/bin/blk_bench_throttling (tests/bench/host/throttling_cost.cc) times a queue's null
# backend alone and inside the throttling layer with no limit set, and one request's share of a
# batch of 32 io_uring requests: 4 KiB reads of a cached file (less than a read from any volume
# costs: the application's read goes through the block layer, and the server's command round
# trip and backend come on top) and NOPs. Prints the medians of 5 repetitions and the layer's
# extra time as a share of the cached read. A measurement, no threshold.
set -euo pipefail

build_dir="${1:?usage: tests/bench/throttling-cost.sh BUILD_DIR}"
bench="$build_dir/bin/blk_bench_throttling"
[[ -x "$bench" ]] || {
  echo "throttling-cost: $bench missing (build first)" >&2
  exit 2
}
json="$(mktemp)"
trap 'rm -f "$json"' EXIT
"$bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_format=json >"$json"
jq -r '
  [.benchmarks[] | select(.aggregate_name == "median")
   | {key: (.run_name | sub("^BM_"; "")), value: .real_time}] | from_entries as $ns
  | ($ns.NullBackendThrottlingLayerNoLimits - $ns.NullBackend) as $extra
  | "null backend alone:                       \($ns.NullBackend * 100 | round / 100) ns per request",
    "inside the throttling layer, no limits:   \($ns.NullBackendThrottlingLayerNoLimits * 100 | round / 100) ns",
    "io_uring, batches of 32: a NOP             \($ns.UringNopPerRequest * 100 | round / 100) ns",
    "io_uring, batches of 32: a cached 4k read  \($ns.UringCachedRead4kPerRequest * 100 | round / 100) ns",
    "the layer'"'"'s extra time / that read:        \($extra / $ns.UringCachedRead4kPerRequest * 10000 | round / 100)%"
' "$json"
