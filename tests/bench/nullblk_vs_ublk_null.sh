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

  runtime="${BLK_BENCH_RUNTIME:-10}"
  rounds="${BLK_BENCH_ROUNDS:-3}"

  [[ -b /dev/nullb0 ]] || fail "no /dev/nullb0 (null_blk not loaded)"
  pick_fio_engine
  [[ "$fio_engine" == io_uring ]] || fail "fio cannot use io_uring here"

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
    echo "$(date +%T) round $round"
    a="$(measure /dev/nullb0 "A$round")"
    echo "round $round  A null_blk        $a IOPS"
    b="$(measure "$ublk_dev" "B$round")"
    echo "round $round  B ublk null vol   $b IOPS"
    a_runs+=("$a") b_runs+=("$b")
  done

  jq -n --arg kernel "$(uname -r)" --argjson runtime "$runtime" \
    --argjson a "$(printf '%s\n' "${a_runs[@]}" | jq -s .)" \
    --argjson b "$(printf '%s\n' "${b_runs[@]}" | jq -s .)" '
    { kernel: $kernel, runtime_seconds: $runtime,
      a: { name: "null_blk /dev/nullb0", iops: $a, mean: ($a | add / length | floor) },
      b: { name: "ublk null volume, 2 queues", iops: $b, mean: ($b | add / length | floor) } }
    | .ratio_b_over_a = ((.b.mean / .a.mean * 1000 | round) / 1000)' >"$BLK_VM_OUT/bench.json"

  jq -r '"mean A \(.a.mean) IOPS, mean B \(.b.mean) IOPS, ratio B/A = \(.ratio_b_over_a)"' \
    "$BLK_VM_OUT/bench.json"
  ctl delete-volume bench-null >/dev/null
  stop_agent
}

main "$@"
