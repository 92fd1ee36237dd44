#!/usr/bin/env bash
# Usage: tests/bench/metrics_bench.sh BUILD_DIR
#
# Boots the newest kernel once and runs metrics_on_vs_off.sh there: fio 4k
# random-read IOPS on a ublk `null` volume of an agent started with
# --metrics-address off (A: no per-I/O statistics on the data path) and of one
# with them (B: the default), A/B/A/B, and the ratio B/A, i.e. what the
# statistics leave of the IOPS. Results in
# ${BLK_BENCH_OUT:-BUILD_DIR/bench-results-metrics}/bench.json. A measurement,
# not a test: there is no threshold. BLK_BENCH_RUNTIME and BLK_BENCH_ROUNDS
# reach the guest script.
set -euo pipefail

main() {
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  build_dir="${1:?usage: metrics_bench.sh BUILD_DIR}"
  for tool in blkagent blkctl; do
    [[ -x "$build_dir/bin/$tool" ]] || {
      echo "bench: $build_dir/bin/$tool missing (build first)" >&2
      exit 2
    }
  done
  build_dir="$(cd "$build_dir" && pwd)"
  out="${BLK_BENCH_OUT:-$build_dir/bench-results-metrics}"

  "$here/../vm/run-vm.sh" --kernel newest --out "$out" --keep "$build_dir" \
    -- "$here/metrics_on_vs_off.sh" "$build_dir"
}

main "$@"
