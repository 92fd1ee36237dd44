#!/usr/bin/env bash
# A 2-queue NBD volume on an nbdkit without multi-conn: both queues share one
# connection (nbdkit's log shows exactly one per restart), fio verify from both
# queues' CPUs passes, and nbdkit killed and restarted under that fio, then the
# agent restarted by SIGTERM (an upgrade: the next agent recovers the device),
# lose no data and give fio no error. NBD faults are counted per volume: errors the
# server returns (nbdkit's error filter) show in `blkctl get-volume` (text and
# JSON) and in /metrics as blk_volume_backend_errors_total{kind="server"}, and
# only for that volume.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only lts "the shared connection is the agent's (MSG_RING between its queues)"

scrape() { curl -fsS "http://127.0.0.1:9477/metrics"; }
metric() { scrape | awk -v m="$1" '$1 == m { print $2 }'; }
json_status() { ctl get-volume "$1" -o json | jq -r ".volume.status.$2 // \"0\" | tonumber"; }

# read_block DEV BLOCK CPU: one 4k direct read, submitted from CPU (so through its queue).
read_block() {
  taskset -c "$3" dd if="$1" of=/dev/null bs=4k count=1 skip="$2" iflag=direct status=none
}

server_errors_are_counted() {
  step "a server returning EIO: the error reaches the reader and is counted"
  nbdkit -f -U "$WORK/err.sock" --filter=error --filter=multi-conn memory 16M error=EIO \
    error-rate=100% error-file="$WORK/inject" multi-conn-mode=disable \
    >>"$LOG_DIR/nbdkit-err.log" 2>&1 &
  local pid=$!
  on_exit kill -KILL "$pid"
  wait_for "nbdkit on $WORK/err.sock" 30 unix_listening "$WORK/err.sock"
  ctl create-volume e1 --size 16M --queues 2 --backend "nbd+unix:///?socket=$WORK/err.sock"
  ctl create-volume quiet --size 16M --backend null://
  local dev
  dev="$(volume_device e1)"
  read_block "$dev" 10 0 || fail "a read before the injection failed"
  expect_eq "server errors before the injection" 0 "$(json_status e1 serverErrors)"

  touch "$WORK/inject"
  expect_fail_with "Input/output error" "a read from CPU 0 while the server fails" \
    read_block "$dev" 20 0
  expect_fail_with "Input/output error" "a read from CPU 1 while the server fails" \
    read_block "$dev" 30 1
  rm "$WORK/inject"
  read_block "$dev" 40 1 || fail "a read after the injection failed"

  expect_eq "server errors in GetVolume" 2 "$(json_status e1 serverErrors)"
  expect_eq "protocol errors in GetVolume" 0 "$(json_status e1 protocolErrors)"
  expect_eq "io timeouts in GetVolume" 0 "$(json_status e1 ioTimeouts)"
  ctl get-volume e1 | grep -qE '^server errors: +2$' ||
    fail "blkctl get-volume does not show 2 server errors: $(ctl get-volume e1)"
  echo "ok: blkctl get-volume shows the server errors"
  expect_eq "server errors in /metrics" 2 \
    "$(metric 'blk_volume_backend_errors_total{volume="e1",kind="server"}')"
  expect_eq "protocol errors in /metrics" 0 \
    "$(metric 'blk_volume_backend_errors_total{volume="e1",kind="protocol"}')"
  expect_eq "timeouts in /metrics" 0 \
    "$(metric 'blk_volume_backend_errors_total{volume="e1",kind="timeout"}')"
  scrape | grep -c '^blk_volume_backend_errors_total{volume="quiet"' >/dev/null &&
    fail "/metrics has NBD error series for a null volume"
  echo "ok: no NBD error series for the null volume"
  ctl delete-volume quiet
  ctl delete-volume e1
}

SHARED_PID=""
kill_shared_nbdkit() { kill -KILL $SHARED_PID 2>/dev/null || true; }

# The export is a file, so its data outlives nbdkit restarts; the log filter
# records every connection (appending across restarts).
start_shared_nbdkit() {
  rm -f "$WORK/shared.sock"
  nbdkit -f -U "$WORK/shared.sock" --filter=log --filter=multi-conn file "$WORK/shared.img" \
    multi-conn-mode=disable logfile="$WORK/nbdkit-requests.log" logappend=true \
    >>"$LOG_DIR/nbdkit-shared.log" 2>&1 &
  SHARED_PID=$!
  wait_for "nbdkit on $WORK/shared.sock" 30 unix_listening "$WORK/shared.sock"
}

connections_seen() { grep -c ' Connect ' "$WORK/nbdkit-requests.log" || true; }

writes_done() {
  local stat
  read -ra stat <"/sys/block/${1#/dev/}/stat"
  echo "${stat[4]}"
}
writes_beyond() { (($(writes_done "$1") >= $2)); }


shared_connection() {
  step "2-queue volume s1 on nbdkit without multi-conn"
  truncate -s 64M "$WORK/shared.img"
  on_exit kill_shared_nbdkit
  start_shared_nbdkit
  ctl create-volume s1 --size 32M --queues 2 --io-timeout 60 \
    --backend "nbd+unix:///?socket=$WORK/shared.sock"
  local dev
  dev="$(volume_device s1)"
  expect_eq "connections nbdkit saw for the 2-queue volume" 1 "$(connections_seen)"

  # blk-mq sends a request to the queue of the CPU that submits it: one fio
  # job pinned to each CPU below uses both queues.
  local cpus
  cpus="$(cat "/sys/block/${dev#/dev/}"/mq/{0,1}/cpu_list | sort | paste -sd,)"
  expect_eq "CPUs of the two queues" "0,1" "$cpus"

  step "fio verify from both CPUs (one job each): nbdkit restarted twice, then the agent"
  pick_fio_engine
  fio --name=shared --filename="$dev" --direct=1 --ioengine="$fio_engine" --rw=randwrite \
    --bs=4k --iodepth=16 --numjobs=2 --size=8M --offset_increment=8M --cpus_allowed=0-1 \
    --cpus_allowed_policy=split --randrepeat=1 --verify=crc32c --verify_fatal=1 \
    --verify_backlog=512 --do_verify=1 --rate=256k >"$LOG_DIR/fio-shared.log" 2>&1 &
  local fio_pid=$!
  on_exit kill "$fio_pid"
  local round writes
  for round in 1 2; do
    writes="$(writes_done "$dev")"
    wait_for "writes to flow on $dev (round $round)" 60 writes_beyond "$dev" $((writes + 64))
    process_gone "$fio_pid" && fail "fio ended before restart $round; see fio-shared.log"
    kill -KILL "$SHARED_PID"
    wait_gone "$SHARED_PID" 10 || fail "nbdkit survived SIGKILL"
    echo "nbdkit killed (round $round)"
    start_shared_nbdkit
  done
  writes="$(writes_done "$dev")"
  wait_for "writes to flow on $dev (agent restart)" 60 writes_beyond "$dev" $((writes + 64))
  process_gone "$fio_pid" && fail "fio ended before the agent restart; see fio-shared.log"
  local first_reconnects
  first_reconnects="$(json_status s1 reconnects)"
  ((first_reconnects >= 2)) ||
    fail "GetVolume shows $first_reconnects reconnects after 2 nbdkit restarts"
  expect_eq "connections nbdkit saw (one, then one per reconnect)" $((1 + first_reconnects)) \
    "$(connections_seen)"
  stop_agent
  start_agent --metrics-address 127.0.0.1:9477
  expect_eq "s1 device after the agent restart" "$dev" "$(volume_device s1)"
  local status=0
  wait "$fio_pid" || status=$?
  if ((status != 0)); then
    cat "$LOG_DIR/fio-shared.log" >&2
    fail "fio exited with status $status across nbdkit restarts"
  fi
  (($(grep -cE "err= *0" "$LOG_DIR/fio-shared.log") == 2)) ||
    fail "fio reported errors: $(grep -E 'err=' "$LOG_DIR/fio-shared.log")"
  echo "ok: 2 fio jobs wrote and verified 8M each across 2 nbdkit and 1 agent restarts"

  # The next agent recovered the device with one connection of its own.
  expect_eq "connections nbdkit saw (one per agent, one per reconnect)" \
    $((2 + first_reconnects + $(json_status s1 reconnects))) "$(connections_seen)"
  expect_eq "io timeouts" 0 "$(json_status s1 ioTimeouts)"
  cp "$WORK/nbdkit-requests.log" "$LOG_DIR/" 2>/dev/null || true
  ctl delete-volume s1
}

main() {
  command -v nbdkit >/dev/null || fail "nbdkit not found in the guest"
  start_agent --metrics-address 127.0.0.1:9477
  shared_connection
  server_errors_are_counted
  stop_agent
}

main "$@"
