#!/usr/bin/env bash
# Per-volume I/O limits (QoS) on null volumes under fio, as a user sets them with blkctl: fio
# well above a limit measures within 10% of it, for read and write IOPS and read and write
# bytes/s; a large request is not starved by small ones on another queue; two volumes with
# different limits at once each get theirs; a limit raised and lowered while fio runs takes
# effect within a second, without an I/O error, and blkctl stats shows the requests it holds
# back; a burst goes at full speed, then the limit holds; an agent restart keeps the limits; bad
# values are refused and change nothing; requests a limit holds do not hold up SIGTERM (the next
# agent gets them) or a forced delete (they fail); an agent with --io-limits off refuses them.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only newest "the limits are the agent's, the same on every kernel"

# fio_rate LOG DEVICE RW BS SECONDS [ARGS]: fio at QD32 (1 s ramp, not measured) well above any
# limit here; prints "IOPS BYTES_PER_SECOND" of the measured part.
fio_rate() {
  local log="$1" dev="$2" rw="$3" bs="$4" secs="$5"
  shift 5
  run_fio "$log" --name=rate --filename="$dev" --direct=1 --ioengine="$fio_engine" --rw="$rw" \
    --bs="$bs" --iodepth=32 --time_based --ramp_time=1 --runtime="$secs" --output-format=json "$@" ||
    fail "fio $rw on $dev"
  jq -r --arg d "${rw#rand}" '.jobs[0][$d] | "\(.iops | floor) \(.bw_bytes)"' "$LOG_DIR/$log"
}

# within_10 DESC MEASURED LIMIT: fails unless MEASURED is within 10% of LIMIT.
within_10() {
  local desc="$1" measured="${2%.*}" limit="$3"
  ((measured * 10 >= limit * 9 && measured * 10 <= limit * 11)) ||
    fail "$desc: measured $measured, not within 10% of the limit $limit"
  echo "ok: $desc: $measured against a limit of $limit"
}

reads_done() {
  local stat
  read -ra stat <"/sys/block/${1#/dev/}/stat"
  echo "${stat[0]}"
}

reads_moved() { (($(reads_done "$1") > $2)); }

# reads_per_second DEVICE: the device's reads per second over the next 2 s, by the clock (read
# without a subshell: a fork under TCG takes long enough to skew the window).
reads_per_second() {
  local stat start end before
  read -ra stat <"/sys/block/${1#/dev/}/stat"
  start="${EPOCHREALTIME/./}"
  before="${stat[0]}"
  sleep 2
  read -ra stat <"/sys/block/${1#/dev/}/stat"
  end="${EPOCHREALTIME/./}"
  echo $(((stat[0] - before) * 1000000 / (end - start)))
}

main() {
  pick_fio_engine
  start_agent --metrics-address 127.0.0.1:9477

  step "bad values are refused"
  expect_fail_with "read-iops" "a negative IOPS limit" \
    ctl create-volume bad --size 64M --backend null:// --read-iops -5
  expect_fail_with "volume\.limits\.read_iops\.rate" "an absurd IOPS limit" \
    ctl create-volume bad --size 64M --backend null:// --read-iops 20000000
  expect_fail_with "volume\.limits\.read_bytes_per_second\.burst" "a bytes burst below one request" \
    ctl create-volume bad --size 64M --backend null:// --read-bps 10M:4K
  expect_eq "volumes after the refusals" 0 "$(ctl list-volumes -o json | jq '.volumes // [] | length')"

  step "one limit of each kind, measured with fio well above it"
  ctl create-volume a --size 256M --backend null:// --queues 2 --read-iops 1500 --write-bps 16M
  ctl get-volume a | grep -E "^limits:" || fail "get-volume a shows no limits"
  local dev_a measured
  dev_a="$(volume_device a)"
  read -r measured _ < <(fio_rate fio-read-iops.json "$dev_a" randread 4k 3 --numjobs=1)
  within_10 "read IOPS of a" "$measured" 1500
  read -r _ measured < <(fio_rate fio-write-bps.json "$dev_a" randwrite 64k 3 --numjobs=1)
  within_10 "write bytes/s of a" "$measured" $((16 << 20))
  ctl update-volume a --no-limits --write-iops 1000 --read-bps 24M
  read -r measured _ < <(fio_rate fio-write-iops.json "$dev_a" randwrite 4k 3 --numjobs=1)
  within_10 "write IOPS of a" "$measured" 1000
  read -r _ measured < <(fio_rate fio-read-bps.json "$dev_a" randread 64k 3 --numjobs=1)
  within_10 "read bytes/s of a" "$measured" $((24 << 20))

  step "a 512 KiB reader keeps its place beside a 4 KiB reader on the other queue"
  # Each queue's oldest held request reserves its place: the large one must not wait for a
  # bucket with room for all of it, which the small ones would never leave.
  ctl update-volume a --no-limits --read-bps 8M
  run_fio fio-large-small.json --filename="$dev_a" --direct=1 --ioengine="$fio_engine" \
    --rw=randread --time_based --ramp_time=1 --runtime=3 --output-format=json \
    --name=large --bs=512k --iodepth=1 --cpus_allowed=0 \
    --name=small --bs=4k --iodepth=32 --cpus_allowed=1 || fail "fio large and small readers on a"
  local large small
  large="$(jq -r '.jobs[] | select(.jobname == "large") | .read.bw_bytes' "$LOG_DIR/fio-large-small.json")"
  small="$(jq -r '.jobs[] | select(.jobname == "small") | .read.bw_bytes' "$LOG_DIR/fio-large-small.json")"
  echo "512 KiB reader: $large bytes/s, 4 KiB reader: $small bytes/s"
  ((large * 4 >= 8 << 20)) || fail "the 512 KiB reader got $large bytes/s of the 8 MiB/s limit"
  ((small > 0)) || fail "the 4 KiB reader got nothing"
  within_10 "read bytes/s of the two together" $((large + small)) $((8 << 20))

  step "two volumes with different limits at once"
  ctl update-volume a --no-limits --iops 600
  ctl create-volume b --size 256M --backend null:// --iops 1500
  local dev_b
  dev_b="$(volume_device b)"
  fio_rate fio-a-together.json "$dev_a" randread 4k 4 >"$WORK/a.rate" &
  local fio_a=$!
  read -r measured _ < <(fio_rate fio-b-together.json "$dev_b" randread 4k 4)
  wait "$fio_a" || fail "fio on a beside b"
  within_10 "IOPS of b beside a" "$measured" 1500
  read -r measured _ <"$WORK/a.rate"
  within_10 "IOPS of a beside b" "$measured" 600
  ctl get-volume a | grep -E "^throttled:" || fail "get-volume a shows no throttled time"

  step "a limit raised and lowered under fio takes effect within a second, no I/O error"
  ctl update-volume b --iops 500
  run_fio fio-changing.log --name=changing --filename="$dev_b" --direct=1 --ioengine="$fio_engine" \
    --rw=randread --bs=4k --iodepth=32 --time_based --runtime=10 &
  local fio_pid=$!
  local before
  before="$(reads_done "$dev_b")"
  wait_for "fio to read from b" 15 reads_moved "$dev_b" "$before"
  ctl update-volume b --iops 2000
  sleep 1 # the new limit's second
  measured="$(reads_per_second "$dev_b")"
  within_10 "reads/s of b a second after raising its limit to 2000" "$measured" 2000
  ctl update-volume b --iops 300
  sleep 1
  measured="$(reads_per_second "$dev_b")"
  within_10 "reads/s of b a second after lowering its limit to 300" "$measured" 300
  wait "$fio_pid" || fail "fio on b while its limit changed (see fio-changing.log)"
  grep -qE "err= *0" "$LOG_DIR/fio-changing.log" || fail "fio on b saw errors"

  # blkctl stats while a fio of its own runs (stopped once stats has its interval): at QD32 about
  # 32 requests wait, so nearly every read is held back, ~0.1 s each.
  # fio itself in the background (not run_fio's subshell, which would hold the signal back).
  fio --name=held --filename="$dev_b" --direct=1 --ioengine="$fio_engine" --rw=randread --bs=4k \
    --iodepth=32 --time_based --runtime=120 >"$LOG_DIR/fio-held.log" 2>&1 &
  fio_pid=$!
  before="$(reads_done "$dev_b")"
  wait_for "fio to read from b" 15 reads_moved "$dev_b" "$before"
  ctl stats b --interval 1s --count 1 -o json | tee "$LOG_DIR/stats-b.json"
  kill -INT "$fio_pid"
  wait "$fio_pid" || true
  jq -e '.throttledPerSecond >= 100 and .avgThrottleWaitSeconds > 0.01' "$LOG_DIR/stats-b.json" \
    >/dev/null || fail "blkctl stats does not show b's reads held back by its limit of 300/s"

  step "a burst goes at full speed, then the limit holds"
  # A new limit's bucket starts full.
  ctl update-volume b --no-limits --read-iops 200:2000
  # 2000 reads in the burst, then 400 more: at 200/s the second batch cannot finish before the
  # whole 2400 took (2400 - 2000) / 200 = 2 s.
  local start middle end
  start="${EPOCHREALTIME/./}"
  dd if="$dev_b" of=/dev/null bs=4k count=2000 iflag=direct status=none
  middle="${EPOCHREALTIME/./}"
  dd if="$dev_b" of=/dev/null bs=4k count=400 iflag=direct status=none
  end="${EPOCHREALTIME/./}"
  # At the limit the burst would take 10 s.
  (((middle - start) < 5000000)) || fail "2000 reads within the burst took $(((middle - start) / 1000)) ms"
  (((end - start) >= 1800000)) || fail "2400 reads with a burst of 2000 at 200/s took only $(((end - start) / 1000)) ms"
  echo "ok: the burst of 2000 reads took $(((middle - start) / 1000)) ms, 400 more $(((end - middle) / 1000)) ms (limit 200/s)"

  step "an agent restart keeps the limits"
  stop_agent
  start_agent --metrics-address 127.0.0.1:9477
  expect_eq "b's read IOPS limit after the restart" 200 \
    "$(ctl get-volume b -o json | jq -r '.volume.limits.readIops.rate')"
  read -r measured _ < <(fio_rate fio-after-restart.json "$dev_a" randread 4k 3 --numjobs=1)
  within_10 "IOPS of a after the restart" "$measured" 600
  curl -fsS http://127.0.0.1:9477/metrics | grep -E '^blk_volume_throttled_requests_total\{volume="a"\} [1-9]' ||
    fail "no throttled requests counted for a in /metrics"

  step "a bad update is refused and changes nothing"
  expect_fail_with "volume\.limits\.total_iops\.rate" "an absurd update" \
    ctl update-volume a --iops 50000000
  expect_eq "a's total IOPS limit after the refused update" 600 \
    "$(ctl get-volume a -o json | jq -r '.volume.limits.totalIops.rate')"

  ctl delete-volume a
  ctl delete-volume b

  # 64 reads at 2/s would hold a stop for 32 s: what a limit holds does not count as under way.
  step "requests a limit holds pin neither SIGTERM (the next agent gets them) nor a forced delete"
  ctl create-volume slow --size 64M --backend null:// --iops 2
  local dev_slow
  dev_slow="$(volume_device slow)"
  run_fio fio-slow.log --name=slow --filename="$dev_slow" --direct=1 --ioengine="$fio_engine" \
    --rw=randread --bs=4k --iodepth=64 --time_based --runtime=600 &
  fio_pid=$!
  stop_slow_fio() { kill -KILL "$fio_pid" 2>/dev/null || true; }
  on_exit stop_slow_fio
  held_reads() { local n; read -r n _ <"/sys/block/${dev_slow#/dev/}/inflight"; ((n >= 32)); }
  wait_for "fio's reads held by the limit" 30 held_reads
  stop_agent
  start_agent --metrics-address 127.0.0.1:9477
  wait_for "the reads held again, by the new agent" 30 held_reads
  timeout 20 blkctl --socket "$AGENT_SOCKET" delete-volume slow --force ||
    fail "a forced delete of a volume whose limit holds 64 reads did not end within 20 s"
  local fio_status=0
  wait "$fio_pid" || fio_status=$?
  ((fio_status != 0)) || fail "fio on the forcibly deleted volume reported no error"
  echo "ok: stopped and deleted under held reads; fio got errors (exit status $fio_status)"

  step "an agent with --io-limits off (no throttling layer) refuses limits"
  stop_agent
  start_agent --io-limits off
  expect_fail_with "FAILED_PRECONDITION.*--io-limits off" "a volume with limits" \
    ctl create-volume c --size 64M --backend null:// --iops 100
  ctl create-volume d --size 64M --backend null://
  expect_fail_with "FAILED_PRECONDITION.*--io-limits off" "limits on a live volume" \
    ctl update-volume d --iops 100
  expect_eq "d's limits after the refusal" "null" "$(ctl get-volume d -o json | jq -c '.volume.limits')"
  dd if="$(volume_device d)" of=/dev/null bs=4k count=1000 iflag=direct status=none ||
    fail "reads from d (no throttling layer) failed"
  ctl delete-volume d
  stop_agent
}

main "$@"
