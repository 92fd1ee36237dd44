#!/usr/bin/env bash
# Usage: tests/bench/nbd_bench.sh BUILD_DIR
#
# Boots the newest kernel once and runs nbd_vs_kernel_nbd.sh there: fio 4k
# random-read IOPS at iodepth 32 on one nbdkit memory export, read through the
# kernel's NBD client (A: nbd-client + nbd.ko) and through a ublk NBD volume
# made by BUILD_DIR/bin/blkagent (B), A/B/A/B, and the ratio B/A. Results in
# ${BLK_BENCH_OUT:-BUILD_DIR/bench-results-nbd}/bench.json. A measurement, not a
# test: there is no threshold. BLK_BENCH_RUNTIME and BLK_BENCH_ROUNDS reach the
# guest script.
set -euo pipefail

main() {
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  build_dir="${1:?usage: nbd_bench.sh BUILD_DIR}"
  for tool in "$build_dir/bin/blkagent" "$build_dir/bin/blkctl" "$(command -v nbd-client)" \
    "$(command -v nbdkit)"; do
    [[ -x "$tool" ]] || {
      echo "nbd bench: missing $tool (build first; nbd-client and nbdkit come from scripts/setup.sh)" >&2
      exit 2
    }
  done
  build_dir="$(cd "$build_dir" && pwd)"
  out="${BLK_BENCH_OUT:-$build_dir/bench-results-nbd}"
  # The guest loads nbd.ko from the same extracted kernel tree as ublk_drv.
  local kernel_dir
  kernel_dir="$("$here/../vm/fetch-kernel.sh" newest)"
  export BLK_BENCH_MODBASE="$kernel_dir/$(cat "$kernel_dir/modbase")"

  "$here/../vm/run-vm.sh" --kernel newest --out "$out" --keep "$build_dir" \
    -- "$here/nbd_vs_kernel_nbd.sh" "$build_dir"
}

main "$@"
