#!/usr/bin/env bash
# Guest script (run by tests/bench/nbd_bench.sh through tests/vm/run-vm.sh):
#   nbd_vs_kernel_nbd.sh BUILD_DIR
# One nbdkit memory export (1 GiB, loopback TCP) read with fio 4k random reads,
# iodepth 32, 1 job, io_uring, O_DIRECT, through the kernel's NBD client
# (/dev/nbd0 via nbd-client, one connection: A) and through a ublk NBD volume
# made by blkagent (one queue, one connection: B), alternating A/B/A/B within
# this one boot. Prints every run's IOPS and the ratio of the means, B/A, and
# writes them to $BLK_VM_OUT/bench.json. No threshold.
#
# Environment: BLK_BENCH_MODBASE (modules tree for modprobe -d, set by
#              nbd_bench.sh), BLK_BENCH_RUNTIME (seconds per run, default 10),
#              BLK_BENCH_ROUNDS (A/B pairs, default 3)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

main() {
  build_dir="${1:?usage: nbd_vs_kernel_nbd.sh BUILD_DIR}"
  build_dir="$(cd "$build_dir" && pwd)"
  export PATH="$build_dir/bin:$PATH"
  # shellcheck source=../vm/scenarios/lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/../vm/scenarios/lib.sh"
  # shellcheck source=lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

  [[ -n "${BLK_BENCH_MODBASE:-}" ]] || fail "BLK_BENCH_MODBASE is not set (run nbd_bench.sh)"
  modprobe -d "$BLK_BENCH_MODBASE" nbd nbds_max=1 || fail "modprobe nbd failed"
  nbdkit -f -i 127.0.0.1 -p 10809 memory 1G >>"$LOG_DIR/nbdkit.log" 2>&1 &
  local nbdkit_pid=$!
  on_exit kill "$nbdkit_pid"
  tcp_open() { (exec 3<>/dev/tcp/127.0.0.1/10809) 2>/dev/null; }
  wait_for "nbdkit on 127.0.0.1:10809" 30 tcp_open

  # The same bytes for both readers: written once through the kernel client.
  nbd-client -N bench 127.0.0.1 10809 /dev/nbd0 -b 4096 >>"$LOG_DIR/nbd-client.log" 2>&1 ||
    fail "nbd-client could not connect /dev/nbd0"
  on_exit nbd-client -d /dev/nbd0
  wait_for "/dev/nbd0 to have a size" 30 test "$(cat /sys/block/nbd0/size)" -gt 0
  dd if=/dev/urandom of=/dev/nbd0 bs=1M count=256 oflag=direct status=none ||
    fail "could not fill the export"

  start_agent --log-level warn
  ctl create-volume bench-nbd --size 1G --backend nbd://127.0.0.1:10809/bench >/dev/null
  ublk_dev="$(volume_device bench-nbd)"
  delete_volume_on_failure() {
    [[ -z "$AGENT_PID" ]] || ctl delete-volume bench-nbd --force >/dev/null
  }
  on_exit delete_volume_on_failure

  echo "kernel $(uname -r), $(nproc) cpus; A: /dev/nbd0 (nbd-client, 1 connection);" \
    "B: $ublk_dev (ublk NBD volume, 1 queue)"
  echo "fio: 4k randread over the first 256 MiB, iodepth 32, 1 job, io_uring, direct," \
    "${bench_runtime}s per run"

  bench_ab "kernel nbd client /dev/nbd0" /dev/nbd0 "ublk NBD volume, 1 queue" "$ublk_dev" \
    --numjobs=1 --size=256M
  ctl delete-volume bench-nbd >/dev/null
  stop_agent
}

main "$@"
