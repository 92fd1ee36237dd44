# shellcheck shell=bash
# The N-way loop shared by the guest bench script (tests/bench/guest.sh),
# sourced after tests/vm/scenarios/lib.sh:
#   bench_group GROUP TITLE "TESTS" "FIO_ARGS" DEVICE...
# DEVICE is "KEY|NAME|PATH|EXTRA_FIO_ARGS" (EXTRA_FIO_ARGS may be empty, and
# PATH may be "-" with NAME then saying why the device is not there). TESTS
# is a subset of (EXTRA_FIO_ARGS go to all three):
#   iops  4k random reads, iodepth 32, + FIO_ARGS (e.g. --numjobs=2): read IOPS
#   lat   4k random reads, iodepth 1, 1 job: p50 and p99 latency in us
#   seq   128k sequential reads, iodepth 32, 1 job: MB/s
# Every test runs on every device in turn, BLK_BENCH_ROUNDS times (default 3),
# BLK_BENCH_RUNTIME seconds each (default 10), so the devices alternate and
# share whatever the (emulated) machine does meanwhile. Writes
# $BENCH_GROUPS_DIR/GROUP.json with every run and the medians;
# tests/bench/report.sh turns the groups into bench.json and bench.md. Only
# ratios within one boot mean something: TCG numbers move 2x between boots.
#   bench_ratio GROUP LABEL KEY_A KEY_B   asks the report for A/B

bench_runtime="${BLK_BENCH_RUNTIME:-10}"
bench_rounds="${BLK_BENCH_ROUNDS:-3}"
# Smoke runs: BLK_BENCH_RAMP=0 skips fio's 1 s warm-up; BLK_BENCH_TESTS="iops" keeps only the
# groups' tests named there.
bench_ramp="${BLK_BENCH_RAMP:-1}"
bench_only_tests="${BLK_BENCH_TESTS:-}"
BENCH_GROUPS_DIR="${BENCH_GROUPS_DIR:-$BLK_VM_OUT/groups}"
mkdir -p "$BENCH_GROUPS_DIR"

# bench_fio DEV LOG TEST FIO_ARGS...: prints the TEST's numbers of one fio run
# (iops: IOPS; lat: "p50 p99" in us; seq: MB/s). fio takes the last value of
# an option, so FIO_ARGS can override the defaults (e.g. the engine).
bench_fio() {
  local dev="$1" log="$2" test="$3" json
  shift 3
  local shape=()
  case "$test" in
    iops) shape=(--rw=randread --bs=4k --iodepth=32) ;;
    lat) shape=(--rw=randread --bs=4k --iodepth=1 --lat_percentiles=1) ;;
    seq) shape=(--rw=read --bs=128k --iodepth=32) ;;
    *) fail "bench_fio: unknown test '$test'" ;;
  esac
  json="$LOG_DIR/fio-$log.json"
  fio --name="$test" --filename="$dev" "${shape[@]}" --ioengine=io_uring --direct=1 \
    --time_based --runtime="$bench_runtime" --ramp_time="$bench_ramp" --group_reporting \
    --output-format=json --output="$json" "$@" >/dev/null ||
    fail "fio on $dev failed (see $json)"
  case "$test" in
    iops) jq -r '.jobs[0].read.iops | floor' "$json" ;;
    lat) jq -r '.jobs[0].read.lat_ns.percentile | "\(.["50.000000"] / 1000 | round) \(.["99.000000"] / 1000 | round)"' "$json" ;;
    seq) jq -r '.jobs[0].read.bw_bytes / 1000000 | round' "$json" ;;
  esac
}

bench_group() {
  local group="$1" title="$2" tests="$3" fio_args="$4"
  shift 4
  pick_fio_engine
  # shellcheck disable=SC2154 # set by pick_fio_engine
  [[ "$fio_engine" == io_uring ]] || fail "fio cannot use io_uring here"
  local -a keys=() names=() paths=() extras=()
  local spec key name path extra
  for spec in "$@"; do
    IFS='|' read -r key name path extra <<<"$spec"
    keys+=("$key") names+=("$name") paths+=("$path") extras+=("$extra")
  done
  local runs="$WORK/bench-$group.runs" round test i value args
  : >"$runs"
  if [[ -n "$bench_only_tests" ]]; then
    local wanted=()
    for test in $tests; do
      [[ " $bench_only_tests " != *" $test "* ]] || wanted+=("$test")
    done
    tests="${wanted[*]}"
  fi
  for ((round = 1; round <= bench_rounds; round++)); do
    for test in $tests; do
      for i in "${!keys[@]}"; do
        [[ "${paths[$i]}" != - ]] || continue
        args=()
        [[ "$test" != iops ]] || read -ra args <<<"$fio_args"
        read -ra extra <<<"${extras[$i]}"
        value="$(bench_fio "${paths[$i]}" "$group-$test-${keys[$i]}-$round" "$test" \
          "${args[@]}" "${extra[@]}")"
        echo "$(date +%T) $group round $round  $test  ${names[$i]}: $value"
        echo "${keys[$i]} $test $value" >>"$runs"
      done
    done
  done
  echo "$(date +%T) $group: runs done"
  local devices="[]"
  for i in "${!keys[@]}"; do
    devices="$(jq --arg key "${keys[$i]}" --arg name "${names[$i]}" --arg path "${paths[$i]}" \
      --rawfile runs "$runs" '
      def median: sort | if length == 0 then null
        elif length % 2 == 1 then .[length / 2 | floor]
        else ((.[length / 2 - 1] + .[length / 2]) / 2 | round) end;
      def series($test; $field): [$runs | split("\n")[] | split(" ")
        | select(.[0] == $key and .[1] == $test) | .[$field] | tonumber];
      . + [if $path == "-" then { key: $key, name: $name, unavailable: true } else
        { key: $key, name: $name, path: $path,
          iops: series("iops"; 2), lat_p50_us: series("lat"; 2), lat_p99_us: series("lat"; 3),
          seq_mbps: series("seq"; 2) }
        | .median = { iops: (.iops | median), lat_p50_us: (.lat_p50_us | median),
                      lat_p99_us: (.lat_p99_us | median), seq_mbps: (.seq_mbps | median) } end]' \
      <<<"$devices")"
  done
  jq -n --arg group "$group" --arg title "$title" --arg kernel "$(uname -r)" \
    --argjson runtime "$bench_runtime" --argjson rounds "$bench_rounds" --arg tests "$tests" \
    --arg fio_args "$fio_args" --argjson devices "$devices" \
    '{ group: $group, title: $title, kernel: $kernel, runtime_seconds: $runtime,
       rounds: $rounds, tests: ($tests | split(" ")), iops_fio_args: $fio_args,
       devices: $devices, ratios: [] }' >"$BENCH_GROUPS_DIR/$group.json"
}

bench_ratio() {
  local file="$BENCH_GROUPS_DIR/$1.json"
  jq --arg name "$2" --arg a "$3" --arg b "$4" '.ratios += [{ "label": $name, a: $a, b: $b }]' \
    "$file" >"$file.tmp"
  mv "$file.tmp" "$file"
}
