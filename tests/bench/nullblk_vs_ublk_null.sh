#!/usr/bin/env bash
# Guest script (run by tests/bench/run.sh through tests/vm/run-vm.sh):
#   nullblk_vs_ublk_null.sh BUILD_DIR
# fio 4k random reads, iodepth 32, 2 jobs, io_uring, O_DIRECT, on the kernel's
# null_blk (/dev/nullb0: A) and on a `null` volume created through blkagent
# with 2 queues (B), alternating A/B/A/B within this one boot. Prints the IOPS
# of every run and the ratio of the means, B/A, and writes them to
# $BLK_VM_OUT/bench.json. No threshold: TCG numbers move 2x between boots,
# only the ratio within one boot means something.
#
# Environment: BLK_BENCH_RUNTIME (seconds per run, default 10),
#              BLK_BENCH_ROUNDS (A/B pairs, default 3)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

# Everything runs inside main: bash parses a function whole before running it,
# so editing this file while it runs (the VM takes minutes) cannot derail it.
main() {
  build_dir="${1:?usage: nullblk_vs_ublk_null.sh BUILD_DIR}"
  build_dir="$(cd "$build_dir" && pwd)"
  export PATH="$build_dir/bin:$PATH"
  # shellcheck source=../vm/scenarios/lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/../vm/scenarios/lib.sh"
  # shellcheck source=lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

  [[ -b /dev/nullb0 ]] || fail "no /dev/nullb0 (null_blk not loaded)"

  start_agent --log-level warn
  ctl create-volume bench-null --size 4G --backend null:// --queues 2 >/dev/null
  ublk_dev="$(volume_device bench-null)"
  delete_volume_on_failure() {
    [[ -z "$AGENT_PID" ]] || ctl delete-volume bench-null --force >/dev/null
  }
  on_exit delete_volume_on_failure

  echo "kernel $(uname -r), $(nproc) cpus; null_blk: queue_mode=$(cat /sys/module/null_blk/parameters/queue_mode)" \
    "submit_queues=$(cat /sys/module/null_blk/parameters/submit_queues)" \
    "irqmode=$(cat /sys/module/null_blk/parameters/irqmode); ublk: $ublk_dev, 2 queues"
  echo "fio: 4k randread, iodepth 32, 2 jobs, io_uring, direct, ${bench_runtime}s per run"
  bench_ab "null_blk /dev/nullb0" /dev/nullb0 "ublk null volume, 2 queues" "$ublk_dev" \
    --numjobs=2
  ctl delete-volume bench-null >/dev/null
  stop_agent
}

main "$@"
