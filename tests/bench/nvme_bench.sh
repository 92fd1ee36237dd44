#!/usr/bin/env bash
# Usage: tests/bench/nvme_bench.sh BUILD_DIR
#
# Boots the newest kernel once, with one emulated NVMe namespace (4096-byte
# LBAs), and runs nvme_vs_raw.sh there: fio 4k random-read IOPS at iodepth 32
# on the raw namespace through io_uring passthrough (the ceiling), on its block
# device, and on a ublk NVMe volume made by BUILD_DIR/bin/blkagent over the
# same namespace in copy mode and in zero-copy mode, alternating, with the
# ratios to the ceiling. Results in
# ${BLK_BENCH_OUT:-BUILD_DIR/bench-results-nvme}/bench.json. A measurement, not
# a test: there is no threshold. BLK_BENCH_RUNTIME and BLK_BENCH_ROUNDS reach
# the guest script.
set -euo pipefail

main() {
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  build_dir="${1:?usage: nvme_bench.sh BUILD_DIR}"
  for tool in blkagent blkctl; do
    [[ -x "$build_dir/bin/$tool" ]] || {
      echo "nvme bench: $build_dir/bin/$tool missing (build first)" >&2
      exit 2
    }
  done
  build_dir="$(cd "$build_dir" && pwd)"
  out="${BLK_BENCH_OUT:-$build_dir/bench-results-nvme}"
  mkdir -p "$out"
  truncate -s 1G "$out/nvme-bench.img"
  local status=0
  "$here/../vm/run-vm.sh" --kernel newest --out "$out" --keep "$build_dir" \
    --nvme "$out/nvme-bench.img:4096" -- "$here/nvme_vs_raw.sh" "$build_dir" || status=$?
  rm -f "$out/nvme-bench.img"
  return "$status"
}

main "$@"
