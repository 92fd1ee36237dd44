#!/usr/bin/env bash
# Guest script (run by tests/bench/metrics_bench.sh through tests/vm/run-vm.sh):
#   metrics_on_vs_off.sh BUILD_DIR
# Two agents side by side, each with a `null` volume of 2 queues: A runs with
# --metrics-address off, which also turns per-I/O statistics off on its data
# path; B counts them (the default). fio 4k random reads, iodepth 32, 2 jobs,
# alternating A/B/A/B within this one boot (tests/bench/lib.sh); the ratio B/A
# is what the statistics leave of the IOPS (1.0: they cost nothing). No
# threshold.
#
# Environment: BLK_BENCH_RUNTIME (seconds per run, default 10),
#              BLK_BENCH_ROUNDS (A/B pairs, default 3)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

main() {
  build_dir="${1:?usage: metrics_on_vs_off.sh BUILD_DIR}"
  build_dir="$(cd "$build_dir" && pwd)"
  export PATH="$build_dir/bin:$PATH"
  # shellcheck source=../vm/scenarios/lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/../vm/scenarios/lib.sh"
  # shellcheck source=lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

  # B: the lib.sh agent, with statistics.
  start_agent --log-level warn --metrics-address 127.0.0.1:9477
  ctl create-volume bench-on --size 4G --backend null:// --queues 2 >/dev/null
  dev_on="$(volume_device bench-on)"

  # A: a second agent without them.
  off_socket="$WORK/off.sock"
  mkdir -p "$WORK/off-state"
  blkagent --socket "$off_socket" --state-dir "$WORK/off-state" --metrics-address off \
    --on-exit delete --log-level warn >>"$LOG_DIR/blkagent-off.log" 2>&1 &
  off_pid=$!
  stop_off_agent() {
    kill -TERM "$off_pid" 2>/dev/null || return 0
    wait_gone "$off_pid" 30 || kill -KILL "$off_pid"
  }
  on_exit stop_off_agent
  wait_for "the second agent's socket" 60 test -S "$off_socket"
  blkctl --socket "$off_socket" create-volume bench-off --size 4G --backend null:// --queues 2 \
    >/dev/null
  dev_off="$(blkctl --socket "$off_socket" get-volume bench-off -o json |
    jq -r .volume.status.devicePath)"
  expect_fail_with "FAILED_PRECONDITION.*--metrics-address off" "A keeps no statistics" \
    blkctl --socket "$off_socket" stats bench-off --count 1

  echo "kernel $(uname -r), $(nproc) cpus; A (statistics off): $dev_off, B (on): $dev_on, 2 queues each"
  echo "fio: 4k randread, iodepth 32, 2 jobs, io_uring, direct, ${bench_runtime}s per run"
  bench_ab "ublk null volume, --metrics-address off" "$dev_off" \
    "ublk null volume, per-I/O statistics on" "$dev_on" --numjobs=2
  # B really counted: every read of its runs is in its counter.
  counted="$(curl -fsS http://127.0.0.1:9477/metrics |
    awk '$1 == "blk_volume_ios_total{volume=\"bench-on\",op=\"read\"}" { print $2 }')"
  ((counted > 0)) || fail "agent B counted no reads"

  ctl delete-volume bench-on >/dev/null
  blkctl --socket "$off_socket" delete-volume bench-off >/dev/null
  stop_agent
}

main "$@"
