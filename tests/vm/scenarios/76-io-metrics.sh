#!/usr/bin/env bash
# Per-volume I/O metrics on a real kernel: fio pinned to one CPU with a known
# I/O count, and /metrics counts exactly those I/Os and bytes, in the latency
# histogram too; the queue serving that CPU completes them locally; in-flight
# returns to 0; a failing NBD export shows up as read errors; blkctl stats
# shows the rates while fio runs; promtool accepts the scrape; a deleted
# volume's series are gone from the next scrape; queue threads placed off
# their hctx CPUs complete remotely; and an agent started with
# --metrics-address off refuses GetVolumeStats clearly.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only lts "the counters are the agent's, one code path for both io modes; 78 checks the kernel's side on both"

scrape() { curl -fsS "http://127.0.0.1:9477/metrics"; }
# metric 'NAME{LABELS}': its value in a fresh scrape (empty when absent).
metric() { scrape | awk -v m="$1" '$1 == m { print $2 }'; }
within_one_percent() {  # within_one_percent DESC EXPECTED ACTUAL
  local desc="$1" expected="$2" actual="$3"
  ((expected > 0)) || fail "$desc: expected count is $expected"
  local diff=$((actual - expected))
  ((diff < 0)) && diff=$((-diff))
  ((diff * 100 <= expected)) || fail "$desc: $actual is not within 1% of fio's $expected"
  echo "ok: $desc: $actual (fio: $expected)"
}
# pinned_fio LOGNAME CPU ARGS...: fio on one CPU only, its output in LOG_DIR.
pinned_fio() {
  local log="$LOG_DIR/$1" cpu="$2"
  shift 2
  taskset -c "$cpu" fio "$@" >"$log" 2>&1 || {
    cat "$log" >&2
    fail "fio $* failed"
  }
}
busy=""
stop_busy_fio() { kill "$busy" 2>/dev/null || true; }
# queue_serving DEV CPU: the hctx (ublk queue) of DEV whose cpu_list has CPU (blk-mq's map).
queue_serving() {
  local hctx
  for hctx in "/sys/block/${1#/dev/}/mq/"*; do
    if [[ ",$(tr -d ' ' <"$hctx/cpu_list")," == *",$2,"* ]]; then
      echo "${hctx##*/}"
      return 0
    fi
  done
  fail "no hctx of $1 lists CPU $2"
}
# cpus_label VOLUME QUEUE LABEL: hctx_cpus or thread_cpus of the queue, from blk_queue_cpus_info.
cpus_label() {
  scrape | sed -n "s/^blk_queue_cpus_info{volume=\"$1\",queue=\"$2\",.*$3=\"\([^\"]*\)\".*/\1/p"
}
# completions VOLUME QUEUE LOCALITY
completions() {
  metric "blk_queue_completions_total{volume=\"$1\",queue=\"$2\",locality=\"$3\"}"
}
inflight_is_zero() { [[ "$(metric "blk_volume_inflight_ios{volume=\"$1\"}")" == 0 ]]; }

main() {
  pick_fio_engine
  start_agent --on-exit delete --metrics-address 127.0.0.1:9477
  # Pinned to its hctx CPUs (not the default, node): the serving queue's completions are local.
  ctl create-volume n --size 256M --backend null:// --queues 2 --placement hctx
  ctl create-volume f --size 64M --backend "file://$WORK/f.img"
  local ndev fdev
  ndev="$(volume_device n)"
  fdev="$(volume_device f)"

  # The last CPU, and the queue whose hctx serves it.
  local cpu=$(($(nproc) - 1)) queue
  queue="$(queue_serving "$ndev" "$cpu")"
  echo "CPU $cpu is served by queue $queue of $ndev"
  local q="volume=\"n\",queue=\"$queue\""
  scrape | grep "^blk_queue_cpus_info{volume=\"n\"" >"$LOG_DIR/cpus-info.txt" || true
  cat "$LOG_DIR/cpus-info.txt"
  grep -q "^blk_queue_cpus_info{$q,hctx_cpus=\"$cpu\",thread_cpus=\"$cpu\"} 1$" \
    "$LOG_DIR/cpus-info.txt" || fail "queue $queue: hctx_cpus and thread_cpus are not \"$cpu\""
  expect_eq "queues of n" 2 "$(metric 'blk_volume_queues{volume="n"}')"
  expect_eq "queue depth of n" 128 "$(metric 'blk_volume_queue_depth{volume="n"}')"

  step "fio pinned to CPU $cpu: 64 MiB of 4 KiB random reads on n"
  wait_for "n to be idle" 30 inflight_is_zero n
  local ios0 bytes0 local0
  ios0="$(metric 'blk_volume_ios_total{volume="n",op="read"}')"
  bytes0="$(metric 'blk_volume_bytes_total{volume="n",op="read"}')"
  local0="$(metric "blk_queue_completions_total{$q,locality=\"local\"}")"
  pinned_fio fio-count.log "$cpu" --name=count --filename="$ndev" --rw=randread \
    --bs=4k --size=64M --iodepth=16 --ioengine="$fio_engine" --direct=1 \
    --output-format=json --output="$LOG_DIR/fio-count.json"
  local fio_ios fio_bytes
  fio_ios="$(jq '.jobs[0].read.total_ios' "$LOG_DIR/fio-count.json")"
  fio_bytes="$(jq '.jobs[0].read.io_bytes' "$LOG_DIR/fio-count.json")"
  wait_for "in-flight I/Os of n back to 0" 30 inflight_is_zero n
  local ios1 bytes1 local1
  ios1="$(metric 'blk_volume_ios_total{volume="n",op="read"}')"
  bytes1="$(metric 'blk_volume_bytes_total{volume="n",op="read"}')"
  local1="$(metric "blk_queue_completions_total{$q,locality=\"local\"}")"
  within_one_percent "reads counted on n" "$fio_ios" $((ios1 - ios0))
  within_one_percent "bytes read counted on n" "$fio_bytes" $((bytes1 - bytes0))
  expect_eq "latency histogram count = reads" "$ios1" \
    "$(metric 'blk_volume_io_latency_seconds_count{volume="n",op="read"}')"
  expect_eq "latency histogram +Inf bucket = reads" "$ios1" \
    "$(metric 'blk_volume_io_latency_seconds_bucket{volume="n",op="read",le="+Inf"}')"
  expect_eq "read errors on n" 0 "$(metric 'blk_volume_errors_total{volume="n",op="read"}')"
  within_one_percent "local completions of queue $queue" "$fio_ios" $((local1 - local0))
  expect_eq "remote completions of queue $queue" 0 \
    "$(metric "blk_queue_completions_total{$q,locality=\"remote\"}")"

  step "fio pinned to CPU $cpu: 8 MiB of 4 KiB random writes on the file volume f"
  local w0 wb0 ws0 wn0
  w0="$(metric 'blk_volume_ios_total{volume="f",op="write"}')"
  wb0="$(metric 'blk_volume_bytes_total{volume="f",op="write"}')"
  ws0="$(metric 'blk_volume_io_latency_seconds_sum{volume="f",op="write"}')"
  wn0="$(metric 'blk_volume_io_latency_seconds_count{volume="f",op="write"}')"
  pinned_fio fio-write.log "$cpu" --name=write --filename="$fdev" --rw=randwrite \
    --bs=4k --size=8M --iodepth=16 --ioengine="$fio_engine" --direct=1 \
    --output-format=json --output="$LOG_DIR/fio-write.json"
  wait_for "in-flight I/Os of f back to 0" 30 inflight_is_zero f
  within_one_percent "writes counted on f" "$(jq '.jobs[0].write.total_ios' "$LOG_DIR/fio-write.json")" \
    $(($(metric 'blk_volume_ios_total{volume="f",op="write"}') - w0))
  within_one_percent "bytes written counted on f" \
    "$(jq '.jobs[0].write.io_bytes' "$LOG_DIR/fio-write.json")" \
    $(($(metric 'blk_volume_bytes_total{volume="f",op="write"}') - wb0))
  # The file backend's writes outlive the loop turn they arrived in, so each has a time in the
  # server, and that time lies inside fio's for the same write.
  local server_mean_us fio_mean_us
  server_mean_us="$(awk -v s0="$ws0" -v n0="$wn0" \
    -v s1="$(metric 'blk_volume_io_latency_seconds_sum{volume="f",op="write"}')" \
    -v n1="$(metric 'blk_volume_io_latency_seconds_count{volume="f",op="write"}')" \
    'BEGIN { if (n1 > n0) printf "%.3f", (s1 - s0) / (n1 - n0) * 1e6; else print "none" }')"
  fio_mean_us="$(jq '.jobs[0].write.lat_ns.mean / 1000' "$LOG_DIR/fio-write.json")"
  awk -v s="$server_mean_us" -v f="$fio_mean_us" 'BEGIN { exit !(s > 0 && s < f) }' ||
    fail "f's writes: mean time in the server ${server_mean_us} us is not in (0, fio's ${fio_mean_us} us)"
  echo "ok: f's writes: mean time in the server ${server_mean_us} us, fio's ${fio_mean_us} us"

  if (($(nproc) > 1)); then
    step "queue threads off their hctx CPUs: completions count as remote"
    local other=$((cpu == 0 ? 1 : 0)) pdev pq r0 l0
    ctl create-volume p --size 64M --backend null:// --queues 2 --placement "$other" >/dev/null
    pdev="$(volume_device p)"
    pq="$(queue_serving "$pdev" "$cpu")"
    expect_eq "hctx CPUs of p's queue $pq" "$cpu" "$(cpus_label p "$pq" hctx_cpus)"
    expect_eq "thread CPUs of p's queue $pq (placement $other)" "$other" \
      "$(cpus_label p "$pq" thread_cpus)"
    wait_for "p to be idle" 30 inflight_is_zero p
    r0="$(completions p "$pq" remote)"
    l0="$(completions p "$pq" local)"
    pinned_fio fio-placed.log "$cpu" --name=placed --filename="$pdev" --rw=randread --bs=4k \
      --size=16M --iodepth=16 --ioengine="$fio_engine" --direct=1 \
      --output-format=json --output="$LOG_DIR/fio-placed.json"
    wait_for "p to be idle after fio" 30 inflight_is_zero p
    within_one_percent "remote completions of p's queue $pq" \
      "$(jq '.jobs[0].read.total_ios' "$LOG_DIR/fio-placed.json")" $(($(completions p "$pq" remote) - r0))
    expect_eq "local completions of p's queue $pq during fio" "$l0" "$(completions p "$pq" local)"

    step "spread placement: local or remote as the thread's CPU and the hctx set say"
    local sdev sq hctx_cpus thread_cpus locality
    ctl create-volume sp --size 64M --backend null:// --queues 2 --placement spread >/dev/null
    sdev="$(volume_device sp)"
    sq="$(queue_serving "$sdev" "$cpu")"
    hctx_cpus="$(cpus_label sp "$sq" hctx_cpus)"
    thread_cpus="$(cpus_label sp "$sq" thread_cpus)"
    # Spread pins queue i to the i-th CPU; blk-mq's queue-to-CPU map decides whether that is
    # inside the queue's hctx set (kernels differ).
    locality=remote
    [[ "$thread_cpus" == "$hctx_cpus" ]] && locality=local
    echo "sp: CPU $cpu is served by queue $sq (hctx $hctx_cpus), its thread runs on $thread_cpus: expect $locality"
    wait_for "sp to be idle" 30 inflight_is_zero sp
    r0="$(completions sp "$sq" "$locality")"
    pinned_fio fio-spread.log "$cpu" --name=spread --filename="$sdev" --rw=randread --bs=4k \
      --size=16M --iodepth=16 --ioengine="$fio_engine" --direct=1 \
      --output-format=json --output="$LOG_DIR/fio-spread.json"
    wait_for "sp to be idle after fio" 30 inflight_is_zero sp
    within_one_percent "$locality completions of sp's queue $sq" \
      "$(jq '.jobs[0].read.total_ios' "$LOG_DIR/fio-spread.json")" \
      $(($(completions sp "$sq" "$locality") - r0))
    ctl delete-volume p
    ctl delete-volume sp
  fi

  step "blkctl stats while fio runs"
  local reads_before
  reads_before="$(metric 'blk_volume_ios_total{volume="n",op="read"}')"
  fio --name=busy --filename="$ndev" --rw=randread --bs=4k --iodepth=16 --ioengine="$fio_engine" \
    --direct=1 --time_based --runtime=300 >"$LOG_DIR/fio-busy.log" 2>&1 &
  busy=$!
  on_exit stop_busy_fio
  reads_grew() { (($(metric 'blk_volume_ios_total{volume="n",op="read"}') > reads_before + 1000)); }
  wait_for "fio to be reading from n" 60 reads_grew
  ctl stats n --interval 1s --count 3 -o json >"$LOG_DIR/stats.json" || fail "blkctl stats failed"
  ctl stats n --interval 1s --count 1 | tee "$LOG_DIR/stats.txt"
  stop_busy_fio
  wait "$busy" || true
  cat "$LOG_DIR/stats.json"
  local best
  best="$(jq -s 'map(.readIops) | max | floor' "$LOG_DIR/stats.json")"
  ((best > 0)) || fail "blkctl stats -o json never showed reads while fio ran"
  echo "ok: blkctl stats -o json showed up to $best reads/s"
  awk 'NR == 2 { exit !($2 > 0) }' "$LOG_DIR/stats.txt" || fail "the stats table shows no r/s"
  wait_for "n to be idle after fio" 30 inflight_is_zero n

  step "read errors from a failing NBD export"
  nbdkit -f -U "$WORK/err.sock" --filter=error memory 16M error=EIO error-pread-rate=100% \
    error-file="$WORK/fail-now" >>"$LOG_DIR/nbdkit.log" 2>&1 &
  local nbdkit_pid=$!
  on_exit kill -KILL "$nbdkit_pid"
  wait_for "nbdkit on $WORK/err.sock" 30 unix_listening "$WORK/err.sock"
  ctl create-volume e --size 16M --backend "nbd+unix:///?socket=$WORK/err.sock"
  local edev e0
  edev="$(volume_device e)"
  e0="$(metric 'blk_volume_errors_total{volume="e",op="read"}')"
  touch "$WORK/fail-now"
  if dd if="$edev" of=/dev/null bs=4k count=1 skip=7 iflag=direct status=none 2>"$LOG_DIR/dd.log"; then
    fail "a read from the failing export succeeded"
  fi
  rm -f "$WORK/fail-now"
  local e1
  e1="$(metric 'blk_volume_errors_total{volume="e",op="read"}')"
  ((e1 > e0)) || fail "read errors on e did not grow ($e0 -> $e1)"
  echo "ok: read errors on e: $e0 -> $e1"

  step "promtool check metrics on the scrape"
  scrape >"$LOG_DIR/metrics.txt"
  promtool check metrics <"$LOG_DIR/metrics.txt" || fail "promtool check metrics failed"
  echo "ok: promtool check metrics"

  step "a deleted volume's series are gone"
  ctl delete-volume n
  ctl delete-volume e
  scrape >"$LOG_DIR/metrics-after-delete.txt"
  if grep -E 'volume="(n|e)"' "$LOG_DIR/metrics-after-delete.txt"; then
    fail "series of deleted volumes are still there"
  fi
  grep -q '^blk_volume_ios_total{volume="f",op="write"}' "$LOG_DIR/metrics-after-delete.txt" ||
    fail "the remaining volume f lost its series"
  echo "ok: only f's series remain"
  expect_fail_with "NOT_FOUND: volume 'n' does not exist" "stats of a deleted volume" \
    ctl stats n --count 1
  ctl delete-volume f

  step "an agent with --metrics-address off keeps no statistics, and says so"
  stop_agent
  start_agent --on-exit delete --metrics-address off
  ctl create-volume quiet --size 16M --backend null://
  dd if="$(volume_device quiet)" of=/dev/null bs=4k count=16 iflag=direct status=none ||
    fail "reads from quiet failed"
  expect_fail_with "FAILED_PRECONDITION: I/O statistics are off on this agent \(blkagent --metrics-address off\)" \
    "stats without statistics" ctl stats quiet --count 1
  ctl delete-volume quiet
}
main "$@"
