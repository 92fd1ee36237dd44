# shellcheck shell=bash
# The A/B loop shared by the guest bench scripts, sourced after
# tests/vm/scenarios/lib.sh:
#   bench_ab "NAME A" DEV_A "NAME B" DEV_B FIO_ARGS...
# runs fio 4k random reads (iodepth 32, io_uring, O_DIRECT, time based, plus
# FIO_ARGS) on DEV_A then DEV_B, BLK_BENCH_ROUNDS times (default 3) of
# BLK_BENCH_RUNTIME seconds each (default 10), prints every run's IOPS and the
# ratio of the means B/A, and writes them to $BLK_VM_OUT/bench.json. Only the
# ratio means something: TCG numbers move 2x between boots.

bench_runtime="${BLK_BENCH_RUNTIME:-10}"
bench_rounds="${BLK_BENCH_ROUNDS:-3}"

# bench_iops DEV LABEL FIO_ARGS...: the read IOPS of one fio run (all jobs summed).
bench_iops() {
  local dev="$1" label="$2" json
  shift 2
  json="$LOG_DIR/fio-$label.json"
  fio --name=randread --filename="$dev" --rw=randread --bs=4k --iodepth=32 \
    --ioengine=io_uring --direct=1 --time_based --runtime="$bench_runtime" --ramp_time=1 \
    --group_reporting --output-format=json --output="$json" "$@" >/dev/null ||
    fail "fio on $dev failed (see $json)"
  jq -r '.jobs[0].read.iops | floor' "$json"
}

bench_ab() {
  local name_a="$1" dev_a="$2" name_b="$3" dev_b="$4" round a b
  shift 4
  pick_fio_engine
  [[ "$fio_engine" == io_uring ]] || fail "fio cannot use io_uring here"
  local a_runs=() b_runs=()
  for ((round = 1; round <= bench_rounds; round++)); do
    echo "$(date +%T) round $round"
    a="$(bench_iops "$dev_a" "A$round" "$@")"
    echo "round $round  A $name_a: $a IOPS"
    b="$(bench_iops "$dev_b" "B$round" "$@")"
    echo "round $round  B $name_b: $b IOPS"
    a_runs+=("$a") b_runs+=("$b")
  done
  jq -n --arg kernel "$(uname -r)" --argjson runtime "$bench_runtime" \
    --arg name_a "$name_a" --arg name_b "$name_b" \
    --argjson a "$(printf '%s\n' "${a_runs[@]}" | jq -s .)" \
    --argjson b "$(printf '%s\n' "${b_runs[@]}" | jq -s .)" '
    { kernel: $kernel, runtime_seconds: $runtime,
      a: { name: $name_a, iops: $a, mean: ($a | add / length | floor) },
      b: { name: $name_b, iops: $b, mean: ($b | add / length | floor) } }
    | .ratio_b_over_a = ((.b.mean / .a.mean * 1000 | round) / 1000)' >"$BLK_VM_OUT/bench.json"
  jq -r '"mean A \(.a.mean) IOPS, mean B \(.b.mean) IOPS, ratio B/A = \(.ratio_b_over_a)"' \
    "$BLK_VM_OUT/bench.json"
}
