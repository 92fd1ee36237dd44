#!/usr/bin/env bash
# Usage: tests/bench/run.sh BUILD_DIR
#
# Boots the newest kernel once and runs nullblk_vs_ublk_null.sh there: fio 4k
# random-read IOPS of null_blk (A) against a ublk `null` volume made by
# BUILD_DIR/bin/blkagent (B), A/B/A/B, and the ratio B/A. Results in
# ${BLK_BENCH_OUT:-BUILD_DIR/bench-results}/bench.json. A measurement, not a
# test: there is no threshold. BLK_BENCH_RUNTIME and BLK_BENCH_ROUNDS reach
# the guest script.
set -euo pipefail

# Everything runs inside main: bash parses a function whole before running it,
# so editing this file while it runs (the VM takes minutes) cannot derail it.
main() {
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  build_dir="${1:?usage: run.sh BUILD_DIR}"
  for tool in blkagent blkctl; do
    [[ -x "$build_dir/bin/$tool" ]] || {
      echo "bench: $build_dir/bin/$tool missing (build first)" >&2
      exit 2
    }
  done
  build_dir="$(cd "$build_dir" && pwd)"
  out="${BLK_BENCH_OUT:-$build_dir/bench-results}"

  "$here/../vm/run-vm.sh" --kernel newest --out "$out" --keep "$build_dir" \
    -- "$here/nullblk_vs_ublk_null.sh" "$build_dir"
}

main "$@"
