# shellcheck shell=bash
# The N-way loop shared by the guest bench script (tests/bench/guest.sh),
# sourced after tests/vm/scenarios/lib.sh:
#   bench_group GROUP TITLE "TESTS" "FIO_ARGS" DEVICE...
# DEVICE is "KEY|NAME|PATH|EXTRA_FIO_ARGS|METRICS" (EXTRA_FIO_ARGS may be
# empty, and PATH may be "-" with NAME then saying why the device is not
# there). METRICS, for a volume of ours, is "URL VOLUME" of the agent's
# /metrics: the lat runs then also record the mean time a read spent inside
# the server (blk_volume_io_latency_seconds, from the queue receiving the
# request to committing its result), so the report can split fio's mean into
# the server's part and the rest (the kernel's ublk round trip), and the iops
# runs where the reads completed (bench_locality_counts). TESTS is a
# subset of (EXTRA_FIO_ARGS go to all three):
#   iops  4k random reads, iodepth 32, + FIO_ARGS (e.g. --numjobs=2): read IOPS
#   lat   4k random reads, iodepth 1, 1 job: p50, p99 and mean latency in us
#   seq   128k sequential reads, iodepth 32, 1 job: MB/s
# Every test runs on every device in turn, BLK_BENCH_ROUNDS times (default 3),
# BLK_BENCH_RUNTIME seconds each (default 10), so the devices alternate and
# share whatever the (emulated) machine does meanwhile. Writes
# $BENCH_GROUPS_DIR/GROUP.json with every run and the medians;
# tests/bench/report.sh turns the groups into bench.json and bench.md. Only
# ratios within one boot mean something: TCG numbers move 2x between boots.
#   bench_ratio GROUP LABEL KEY_A KEY_B   asks the report for A/B
# The iops runs also record where the CPU went: every thread's CPU time over
# the run (schedstat) per read fio counted, and its part in user space, by
# thread name (digits as N), with the CPUs' idle time (iowait included) and the
# rest (no thread alive at the end accounts for it: fio's own, threads that
# ended).

bench_runtime="${BLK_BENCH_RUNTIME:-10}"
bench_rounds="${BLK_BENCH_ROUNDS:-3}"
# Smoke runs: BLK_BENCH_RAMP=0 skips fio's 1 s warm-up; BLK_BENCH_TESTS="iops" keeps only the
# groups' tests named there.
bench_ramp="${BLK_BENCH_RAMP:-1}"
bench_only_tests="${BLK_BENCH_TESTS:-}"
BENCH_GROUPS_DIR="${BENCH_GROUPS_DIR:-$BLK_VM_OUT/groups}"
mkdir -p "$BENCH_GROUPS_DIR"

# bench_fio DEV LOG TEST FIO_ARGS...: prints the TEST's numbers of one fio run
# (iops: IOPS; lat: "p50 p99 mean" in us; seq: MB/s). fio takes the last value of
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
    lat) jq -r '.jobs[0].read.lat_ns | .percentile as $p
      | "\($p["50.000000"] / 1000 | round) \($p["99.000000"] / 1000 | round) \(.mean / 100 | round / 10)"' "$json" ;;
    seq) jq -r '.jobs[0].read.bw_bytes / 1000000 | round' "$json" ;;
  esac
}

bench_group() {
  local group="$1" title="$2" tests="$3" fio_args="$4"
  shift 4
  pick_fio_engine
  # shellcheck disable=SC2154 # set by pick_fio_engine
  [[ "$fio_engine" == io_uring ]] || fail "fio cannot use io_uring here"
  local -a keys=() names=() paths=() extras=() metrics=()
  local spec key name path extra metric
  for spec in "$@"; do
    IFS='|' read -r key name path extra metric <<<"$spec"
    keys+=("$key") names+=("$name") paths+=("$path") extras+=("$extra") metrics+=("$metric")
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
  # Each round starts one device later, so that no device always runs first (or right after the
  # same neighbour): a position effect would otherwise read as a difference between devices.
  local count=${#keys[@]} position
  for ((round = 1; round <= bench_rounds; round++)); do
    for test in $tests; do
      for ((position = 0; position < count; position++)); do
        i=$(((position + round - 1) % count))
        [[ "${paths[$i]}" != - ]] || continue
        args=()
        [[ "$test" != iops ]] || read -ra args <<<"$fio_args"
        read -ra extra <<<"${extras[$i]}"
        local server_before=""
        [[ "$test" != lat || -z "${metrics[$i]}" ]] ||
          server_before="$(bench_server_read_ns "${metrics[$i]}")"
        [[ "$test" != iops ]] || bench_cpu_snapshot >"$WORK/bench-cpu-before"
        local locality_before=""
        [[ "$test" != iops || -z "${metrics[$i]}" ]] ||
          locality_before="$(bench_locality_counts "${metrics[$i]}")"
        value="$(bench_fio "${paths[$i]}" "$group-$test-${keys[$i]}-$round" "$test" \
          "${args[@]}" "${extra[@]}")"
        echo "$(date +%T) $group round $round  $test  ${names[$i]}: $value"
        echo "${keys[$i]} $test $value" >>"$runs"
        if [[ "$test" == iops ]]; then
          bench_cpu_snapshot >"$WORK/bench-cpu-after"
          value="$(bench_cpu_per_read "$WORK/bench-cpu-before" "$WORK/bench-cpu-after" "$value")"
          echo "$(date +%T) $group round $round  $test  ${names[$i]}: CPU us per read $value"
          echo "${keys[$i]} cpu $value" >>"$runs"
        fi
        if [[ -n "$locality_before" ]]; then
          value="$(bench_locality_shares "$locality_before" "$(bench_locality_counts "${metrics[$i]}")")"
          echo "$(date +%T) $group round $round  $test  ${names[$i]}: completions (%) $value"
          echo "${keys[$i]} locality $value" >>"$runs"
        fi
        if [[ -n "$server_before" ]]; then
          value="$(bench_server_mean_us "$server_before" "$(bench_server_read_ns "${metrics[$i]}")")"
          echo "$(date +%T) $group round $round  $test  ${names[$i]}: in the server $value us"
          echo "${keys[$i]} server $value" >>"$runs"
        fi
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
        # The mean of the middle two: whole for whole numbers (IOPS), else to 0.1 (CPU us per read).
        elif all(.[]; . == floor) then (.[length / 2 - 1] + .[length / 2]) / 2 | round
        else (.[length / 2 - 1] + .[length / 2]) / 2 * 10 | round / 10 end;
      def series($test; $field): [$runs | split("\n")[] | split(" ")
        | select(.[0] == $key and .[1] == $test) | .[$field] | select(. != "-") | tonumber];
      # $part 0: the whole CPU time per read; 1: its user-space part (idle and rest have none).
      def cpu_runs($part): [$runs | split("\n")[] | split(" ") | select(.[0] == $key and .[1] == "cpu")
        | .[2] | split(";") | map(split("=") | .[0] as $n | .[1] | split("/")
          | select(length > $part) | { ($n): (.[$part] | tonumber) }) | add // {}];
      def cpu_median: ([.[] | keys[]] | unique) as $names | . as $rounds
        | reduce $names[] as $n ({}; .[$n] = ([$rounds[] | .[$n] // 0] | median));
      . + [if $path == "-" then { key: $key, name: $name, unavailable: true } else
        { key: $key, name: $name, path: $path,
          iops: series("iops"; 2), lat_p50_us: series("lat"; 2), lat_p99_us: series("lat"; 3),
          lat_mean_us: series("lat"; 4), server_lat_mean_us: series("server"; 2),
          seq_mbps: series("seq"; 2), cpu_per_read_us: cpu_runs(0),
          cpu_user_per_read_us: cpu_runs(1),
          queue_local_pct: series("locality"; 2), same_cpu_pct: series("locality"; 3),
          same_hctx_group_pct: series("locality"; 4), other_cpu_pct: series("locality"; 5) }
        | .median = { iops: (.iops | median), lat_p50_us: (.lat_p50_us | median),
                      lat_p99_us: (.lat_p99_us | median), lat_mean_us: (.lat_mean_us | median),
                      server_lat_mean_us: (.server_lat_mean_us | median),
                      seq_mbps: (.seq_mbps | median),
                      cpu_per_read_us: (.cpu_per_read_us | cpu_median),
                      cpu_user_per_read_us: (.cpu_user_per_read_us | cpu_median),
                      queue_local_pct: (.queue_local_pct | median),
                      same_cpu_pct: (.same_cpu_pct | median),
                      same_hctx_group_pct: (.same_hctx_group_pct | median),
                      other_cpu_pct: (.other_cpu_pct | median) } end]' \
      <<<"$devices")"
  done
  jq -n --arg group "$group" --arg title "$title" --arg kernel "$(uname -r)" \
    --argjson runtime "$bench_runtime" --argjson rounds "$bench_rounds" --arg tests "$tests" \
    --arg fio_args "$fio_args" --argjson devices "$devices" \
    '{ group: $group, title: $title, kernel: $kernel, runtime_seconds: $runtime,
       rounds: $rounds, tests: ($tests | split(" ")), iops_fio_args: $fio_args,
       devices: $devices, ratios: [] }' >"$BENCH_GROUPS_DIR/$group.json"
}

# bench_cpu_snapshot: "TID NAME NS USER_NS" for every thread (its CPU time so far, and the part of
# it in user space; NAME is its comm with digits as N), then "- idle NS" (all CPUs' idle time) and
# "- wall NS". The user part comes from /proc's tick counts (utime), so it is only as fine as
# CLK_TCK: ample over a run of seconds. grep, unlike awk, goes on past a thread that ended between
# the glob and the read; its status then says so, and is ignored. Idle counts iowait too: a CPU
# with nothing to run is counted as iowait when a task that last ran there sleeps waiting on I/O
# (fio does, in io_uring_enter), so which of the two a stall lands in depends on where the
# sleepers ran.
bench_cpu_snapshot() {
  local hz
  hz="$(getconf CLK_TCK)"
  { grep -H '' /proc/[0-9]*/task/[0-9]*/comm /proc/[0-9]*/task/[0-9]*/schedstat \
    /proc/[0-9]*/task/[0-9]*/stat 2>/dev/null || true; } |
    awk -v hz="$hz" '
      { split($0, path, "/"); tid = path[5]; line = substr($0, index($0, ":") + 1) }
      path[6] ~ /^comm:/ { gsub(/[0-9]+/, "N", line); gsub(/[ ;=\/]/, "_", line); name[tid] = line }
      path[6] ~ /^schedstat:/ { split(line, f, " "); ns[tid] = f[1] }
      # The comm in stat may hold spaces and parentheses: the fields start after the last ") ".
      path[6] ~ /^stat:/ { n = split(substr(line, match(line, /\) [^)]*$/) + 2), f, " ")
        if (n >= 13) user[tid] = f[12] * 1e9 / hz }
      END { for (t in ns) if (t in name) printf "%s %s %s %.0f\n", t, name[t], ns[t], user[t] }'
  awk -v hz="$hz" '$1 == "cpu" { printf "- idle %.0f\n", ($5 + $6) * 1e9 / hz }' /proc/stat
  echo "- wall $(date +%s%N)"
}

# bench_cpu_per_read BEFORE AFTER IOPS: "NAME=US/USER_US;..." each thread name's CPU time per read
# over the run and the part of it in user space, in us, largest first (under 1 us left out), then
# idle and rest (no user part). Reads over the window are IOPS x its length, which includes fio's
# start, the same for every device.
bench_cpu_per_read() {
  awk -v iops="$3" -v cpus="$(nproc)" '
    NR == FNR { key = $1 == "-" ? $2 : $1; before[key] = $3; before_user[key] = $4; next }
    $1 == "-" { after[$2] = $3; next }
    !($1 in before) && ($2 == "grep" || $2 == "awk") { next }  # this snapshot itself
    { used[$2] += $3 - before[$1]; user[$2] += $4 - before_user[$1]; named += $3 - before[$1] }
    END {
      wall = after["wall"] - before["wall"]
      reads = iops * wall / 1e9
      if (reads <= 0) exit 1
      for (n in used) if (used[n] / reads >= 1000) {
        # Ticks round: the user part cannot be more than the whole.
        u = user[n] > used[n] ? used[n] : (user[n] > 0 ? user[n] : 0)
        printf "0 %.1f %s=%.1f/%.1f\n", used[n] / reads / 1000, n, used[n] / reads / 1000, u / reads / 1000
      }
      idle = after["idle"] - before["idle"]
      printf "1 %.1f idle=%.1f\n", idle / reads / 1000, idle / reads / 1000
      rest = (cpus * wall - idle - named) / reads / 1000
      printf "2 %.1f rest=%.1f\n", (rest > 0 ? rest : 0), (rest > 0 ? rest : 0)
    }' "$1" "$2" | sort -k1,1n -k2,2nr | awk '{ printf "%s%s", (NR > 1 ? ";" : ""), $3 }'
}

# bench_server_read_ns "URL VOLUME": "SUM_NS COUNT" of the volume's read latency histogram.
bench_server_read_ns() {
  local url volume
  read -r url volume <<<"$1"
  curl -fsS "$url" | awk -v volume="$volume" '
    index($1, "{volume=\"" volume "\",op=\"read\"") == 0 { next }
    $1 ~ /^blk_volume_io_latency_seconds_sum/ { sum = $2 }
    $1 ~ /^blk_volume_io_latency_seconds_count/ { count = $2 }
    END { printf "%.0f %.0f\n", sum * 1e9, count }'
}

# bench_server_mean_us "SUM COUNT" "SUM COUNT": the mean of the reads between two readings.
bench_server_mean_us() {
  local before after
  read -ra before <<<"$1"
  read -ra after <<<"$2"
  ((after[1] > before[1])) || fail "the agent counted no reads during a lat run"
  awk -v ns=$((after[0] - before[0])) -v n=$((after[1] - before[1])) \
    'BEGIN { printf "%.1f\n", ns / n / 1000 }'
}

# bench_locality_counts "URL VOLUME": "LOCAL REMOTE SAME_CPU SAME_GROUP OTHER", the volume's
# completions so far: by its queue threads on a CPU of their queue's hctx set or off it
# (blk_queue_completions_total), and by where the block layer completed the request relative to
# the CPU that submitted it (blk_block_completions_total, BPF: zeros without it).
bench_locality_counts() {
  local url volume
  read -r url volume <<<"$1"
  curl -fsS "$url" | awk -v label="volume=\"$volume\"" '
    index($1, label) == 0 { next }
    $1 ~ /^blk_queue_completions_total\{/ && $1 ~ /locality="local"/ { c[0] += $2 }
    $1 ~ /^blk_queue_completions_total\{/ && $1 ~ /locality="remote"/ { c[1] += $2 }
    $1 ~ /^blk_block_completions_total\{/ && $1 ~ /locality="same_cpu"/ { c[2] += $2 }
    $1 ~ /^blk_block_completions_total\{/ && $1 ~ /locality="same_hctx_group"/ { c[3] += $2 }
    $1 ~ /^blk_block_completions_total\{/ && $1 ~ /locality="other"/ { c[4] += $2 }
    END { printf "%.0f %.0f %.0f %.0f %.0f\n", c[0], c[1], c[2], c[3], c[4] }'
}

# bench_locality_shares "COUNTS" "COUNTS": "LOCAL SAME_CPU SAME_GROUP OTHER" in percent of the
# completions between two bench_locality_counts ("-" for the block layer's without BPF).
bench_locality_shares() {
  local before after
  read -ra before <<<"$1"
  read -ra after <<<"$2"
  awk -v l=$((after[0] - before[0])) -v r=$((after[1] - before[1])) \
    -v s=$((after[2] - before[2])) -v g=$((after[3] - before[3])) -v o=$((after[4] - before[4])) '
    BEGIN {
      queue = l + r
      if (queue == 0) { print "the agent counted no completions during an iops run" > "/dev/stderr"; exit 1 }
      block = s + g + o
      printf "%.1f ", 100 * l / queue
      if (block == 0) print "- - -"
      else printf "%.1f %.1f %.1f\n", 100 * s / block, 100 * g / block, 100 * o / block
    }'
}

bench_ratio() {
  local file="$BENCH_GROUPS_DIR/$1.json"
  jq --arg name "$2" --arg a "$3" --arg b "$4" '.ratios += [{ "label": $name, a: $a, b: $b }]' \
    "$file" >"$file.tmp"
  mv "$file.tmp" "$file"
}
