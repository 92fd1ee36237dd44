#!/usr/bin/env bash
# Guest script (run by tests/bench/metrics_bench.sh through tests/vm/run-vm.sh):
#   metrics_on_vs_off.sh BUILD_DIR
# Two agents side by side, each with a `null` volume of 2 queues: A counts
# per-I/O statistics (the default), B runs with --metrics-address off, which
# also turns that counting off. fio 4k random reads, iodepth 32, 2 jobs,
# io_uring, O_DIRECT, alternating A/B/A/B within this one boot. Prints the
# IOPS of every run and the ratio of the means A/B (1.0: the statistics cost
# nothing), and writes them to $BLK_VM_OUT/bench.json. No threshold.
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

  runtime="${BLK_BENCH_RUNTIME:-10}"
  rounds="${BLK_BENCH_ROUNDS:-3}"
  pick_fio_engine
  [[ "$fio_engine" == io_uring ]] || fail "fio cannot use io_uring here"

  # A: the lib.sh agent, with statistics.
  start_agent --log-level warn --metrics-address 127.0.0.1:9477
  ctl create-volume bench-on --size 4G --backend null:// --queues 2 >/dev/null
  dev_on="$(volume_device bench-on)"

  # B: a second agent without them.
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
  expect_fail_with "FAILED_PRECONDITION.*--metrics-address off" "B keeps no statistics" \
    blkctl --socket "$off_socket" stats bench-off --count 1

  echo "kernel $(uname -r), $(nproc) cpus; A (statistics on): $dev_on, B (off): $dev_off, 2 queues each"
  echo "fio: 4k randread, iodepth 32, 2 jobs, io_uring, direct, ${runtime}s per run"

  # Prints the summed read IOPS of one fio run on DEV.
  measure() {
    local dev="$1" label="$2" json
    json="$LOG_DIR/fio-$label.json"
    fio --name=randread --filename="$dev" --rw=randread --bs=4k --iodepth=32 --numjobs=2 \
      --ioengine=io_uring --direct=1 --time_based --runtime="$runtime" --ramp_time=1 \
      --group_reporting --output-format=json --output="$json" >/dev/null ||
      fail "fio on $dev failed (see $json)"
    jq -r '.jobs[0].read.iops | floor' "$json"
  }

  a_runs=() b_runs=()
  for ((round = 1; round <= rounds; round++)); do
    a="$(measure "$dev_on" "A$round")"
    echo "round $round  A statistics on   $a IOPS"
    b="$(measure "$dev_off" "B$round")"
    echo "round $round  B statistics off  $b IOPS"
    a_runs+=("$a") b_runs+=("$b")
  done
  # The counted I/Os are all of A's: a check that A really counted.
  counted="$(curl -fsS http://127.0.0.1:9477/metrics |
    awk '$1 == "blk_volume_ios_total{volume=\"bench-on\",op=\"read\"}" { print $2 }')"
  ((counted > 0)) || fail "agent A counted no reads"

  jq -n --arg kernel "$(uname -r)" --argjson runtime "$runtime" \
    --argjson a "$(printf '%s\n' "${a_runs[@]}" | jq -s .)" \
    --argjson b "$(printf '%s\n' "${b_runs[@]}" | jq -s .)" '
    { kernel: $kernel, runtime_seconds: $runtime,
      a: { name: "ublk null volume, per-I/O statistics on", iops: $a, mean: ($a | add / length | floor) },
      b: { name: "ublk null volume, --metrics-address off", iops: $b, mean: ($b | add / length | floor) } }
    | .ratio_a_over_b = ((.a.mean / .b.mean * 1000 | round) / 1000)' >"$BLK_VM_OUT/bench.json"

  jq -r '"mean A (on) \(.a.mean) IOPS, mean B (off) \(.b.mean) IOPS, ratio A/B = \(.ratio_a_over_b)"' \
    "$BLK_VM_OUT/bench.json"
  ctl delete-volume bench-on >/dev/null
  blkctl --socket "$off_socket" delete-volume bench-off >/dev/null
  stop_agent
}

main "$@"
