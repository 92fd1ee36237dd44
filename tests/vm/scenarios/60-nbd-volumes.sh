#!/usr/bin/env bash
# NBD volumes against nbdkit inside the guest: a TCP and an nbd+unix volume pass
# fio verify; nbdkit killed (-9) and restarted twice under fio leaves the data
# intact and fio without an error; a server kept down past io_timeout gives EIO
# without hanging the device or the agent, also to an agent restarted while it is
# down, which recovers the device at once. A volume created without --size
# takes the export's size, and creating it again returns the same device; on a
# server that serves one client and then exits, that costs the one connection. The
# timed-out requests are counted in GetVolume and /metrics.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only lts "NBD is the agent's; 10 and 70 cover both kernels' data paths with asynchronous backends, 62 serves NBD under fio on 7.x"

TCP_PID=""
UNIX_PID=""

SINGLE_PID=""

# The current servers, whichever restart they are at.
kill_nbdkits() { kill -KILL $TCP_PID $UNIX_PID $SINGLE_PID 2>/dev/null || true; }

tcp_open() { (exec 3<>/dev/tcp/127.0.0.1/10809) 2>/dev/null; }

# The TCP export is a file, so its data outlives nbdkit restarts.
start_tcp_nbdkit() {
  nbdkit -f -i 127.0.0.1 -p 10809 file "$WORK/remote.img" >>"$LOG_DIR/nbdkit-tcp.log" 2>&1 &
  TCP_PID=$!
  wait_for "nbdkit on 127.0.0.1:10809" 30 tcp_open
}

writes_done() {
  local stat
  read -ra stat <"/sys/block/${1#/dev/}/stat"
  echo "${stat[4]}"
}

writes_beyond() { (($(writes_done "$1") >= $2)); }

main() {
  command -v nbdkit >/dev/null || fail "nbdkit not found in the guest"
  truncate -s 64M "$WORK/remote.img"
  on_exit kill_nbdkits
  start_tcp_nbdkit
  nbdkit -f -U "$WORK/nbd.sock" memory 64M >>"$LOG_DIR/nbdkit-unix.log" 2>&1 &
  UNIX_PID=$!
  wait_for "nbdkit on $WORK/nbd.sock" 30 unix_listening "$WORK/nbd.sock"

  start_agent --metrics-address 127.0.0.1:9477

  step "TCP volume r1, 2 queues (nbdkit file advertises multi-conn)"
  ctl create-volume r1 --size 64M --queues 2 --backend nbd://127.0.0.1:10809/ --io-timeout 60
  local dev
  dev="$(volume_device r1)"
  expect_eq "r1 sectors" $((64 * 1024 * 1024 / 512)) "$(cat "/sys/block/${dev#/dev/}/size")"
  fio_verify "$dev" 16M

  step "nbd+unix volume r2"
  ctl create-volume r2 --size 32M --backend "nbd+unix:///?socket=$WORK/nbd.sock"
  fio_verify "$(volume_device r2)" 8M

  step "nbd+unix volume r4 without --size takes the export's size (48M)"
  nbdkit -f -U "$WORK/sized.sock" memory 48M >>"$LOG_DIR/nbdkit-sized.log" 2>&1 &
  local sized_pid=$!
  on_exit kill -KILL "$sized_pid"
  wait_for "nbdkit on $WORK/sized.sock" 30 unix_listening "$WORK/sized.sock"
  ctl create-volume r4 --backend "nbd+unix:///?socket=$WORK/sized.sock"
  local dev4
  dev4="$(volume_device r4)"
  expect_eq "r4 sectors" $((48 * 1024 * 1024 / 512)) "$(cat "/sys/block/${dev4#/dev/}/size")"
  expect_eq "r4 size_bytes" $((48 * 1024 * 1024)) \
    "$(ctl get-volume r4 -o json | jq -r '.volume.sizeBytes')"
  ctl create-volume r4 --backend "nbd+unix:///?socket=$WORK/sized.sock"
  expect_eq "r4 device on the repeated create" "$dev4" "$(volume_device r4)"
  fio_verify "$dev4" 8M
  expect_fail_with "ALREADY_EXISTS" "r4 again with a different explicit size" \
    ctl create-volume r4 --size 16M --backend "nbd+unix:///?socket=$WORK/sized.sock"
  ctl delete-volume r4

  step "a server for one client (then it exits): a volume on its size makes only that connection"
  # nbdkit's limit filter refuses a second connection while one is open, exitlast ends it with its
  # client. nbd-server -d did this job, but once here left the agent's connection without a
  # greeting for its whole 10 s handshake time-out (-d is nbd-server's debugging mode: no fork).
  truncate -s 24M "$WORK/single.img"
  nbdkit -f -U "$WORK/single.sock" --filter=exitlast --filter=limit file "$WORK/single.img" limit=1 \
    >>"$LOG_DIR/nbdkit-single.log" 2>&1 &
  SINGLE_PID=$!
  wait_for "nbdkit for one client on $WORK/single.sock" 30 unix_listening "$WORK/single.sock"
  ctl create-volume r5 --backend "nbd+unix:///?socket=$WORK/single.sock"
  fio_verify "$(volume_device r5)" 8M
  ctl delete-volume r5
  wait_for "nbdkit for one client to end with its client" 30 process_gone "$SINGLE_PID"

  step "a volume larger than its export is refused"
  expect_fail_with "larger than the NBD export" "a 128M volume on a 64M export" \
    ctl create-volume r9 --size 128M --backend nbd://127.0.0.1:10809/

  step "nbdkit killed and restarted twice under fio on r1"
  pick_fio_engine
  fio --name=pattern --filename="$dev" --direct=1 --ioengine="$fio_engine" --rw=randwrite \
    --bs=4k --iodepth=16 --size=24M --randrepeat=1 --verify=crc32c --verify_fatal=1 \
    --verify_backlog=1024 --do_verify=1 --rate=1m >"$LOG_DIR/fio-nbd-restart.log" 2>&1 &
  local fio_pid=$!
  on_exit kill "$fio_pid"
  local round writes
  for round in 1 2; do
    writes="$(writes_done "$dev")"
    wait_for "writes to flow on $dev (round $round)" 60 writes_beyond "$dev" $((writes + 64))
    process_gone "$fio_pid" && fail "fio ended before restart $round; see fio-nbd-restart.log"
    kill -KILL "$TCP_PID"
    wait_gone "$TCP_PID" 10 || fail "nbdkit survived SIGKILL"
    echo "nbdkit killed (round $round)"
    start_tcp_nbdkit
  done
  local status=0
  wait "$fio_pid" || status=$?
  if ((status != 0)); then
    cat "$LOG_DIR/fio-nbd-restart.log" >&2
    fail "fio exited with status $status across nbdkit restarts"
  fi
  grep -qE "err= *0" "$LOG_DIR/fio-nbd-restart.log" || fail "fio reported errors"
  echo "ok: fio wrote and verified 24M across 2 nbdkit restarts"
  fio_check_pattern "$dev" 24M
  local reconnects
  reconnects="$(ctl get-volume r1 -o json | jq -r '.volume.status.reconnects // "0" | tonumber')"
  ((reconnects >= 2)) || fail "GetVolume shows $reconnects reconnects after 2 nbdkit restarts"
  echo "ok: GetVolume shows $reconnects reconnects"

  step "server down past io_timeout: EIO, no hang"
  ctl create-volume r3 --size 16M --backend "nbd+unix:///?socket=$WORK/nbd.sock" --io-timeout 3
  local dev3
  dev3="$(volume_device r3)"
  kill -KILL "$UNIX_PID"
  wait_gone "$UNIX_PID" 10 || fail "nbdkit (unix) survived SIGKILL"
  local started=$SECONDS
  expect_fail_with "Input/output error" "a read with the server gone" \
    timeout 60 dd if="$dev3" of=/dev/null bs=4k count=1 skip=100 iflag=direct status=none
  echo "the read failed after $((SECONDS - started))s"
  ((SECONDS - started < 30)) || fail "EIO took $((SECONDS - started))s with io_timeout 3s"
  ctl get-volume r3 >/dev/null || fail "the agent does not answer while a server is down"
  local timeouts
  timeouts="$(ctl get-volume r3 -o json | jq -r '.volume.status.ioTimeouts // "0" | tonumber')"
  ((timeouts >= 1)) || fail "GetVolume shows $timeouts io timeouts after the EIO"
  timeouts="$(curl -fsS http://127.0.0.1:9477/metrics |
    awk '$1 == "blk_volume_backend_errors_total{volume=\"r3\",kind=\"timeout\"}" { print $2 }')"
  ((timeouts >= 1)) || fail "/metrics shows '$timeouts' timeouts for r3"
  echo "ok: the timeout is counted in GetVolume and /metrics"

  step "agent killed (-9) and restarted while r3's server is down: r3 recovered, EIO at io_timeout"
  kill_agent
  start_agent --metrics-address 127.0.0.1:9477
  expect_eq "r3 state after the restart" VOLUME_STATE_LIVE \
    "$(ctl get-volume r3 -o json | jq -r .volume.status.state)"
  expect_fail_with "Input/output error" "a read held across the restart, the server still down" \
    timeout 60 dd if="$dev3" of=/dev/null bs=4k count=1 skip=300 iflag=direct status=none
  rm -f "$WORK/nbd.sock"
  nbdkit -f -U "$WORK/nbd.sock" memory 64M >>"$LOG_DIR/nbdkit-unix.log" 2>&1 &
  UNIX_PID=$!
  wait_for "nbdkit on $WORK/nbd.sock" 30 unix_listening "$WORK/nbd.sock"
  wait_for "r3 to serve reads again" 30 \
    dd if="$dev3" of=/dev/null bs=4k count=1 skip=300 iflag=direct status=none
  echo "ok: r3 serves again once its server is back, without the agent"

  step "delete everything"
  ctl delete-volume r3
  ctl delete-volume r2
  ctl delete-volume r1
  expect_eq "volumes left" 0 "$(ctl list-volumes -o json | jq '.volumes | length')"
  stop_agent
}

main "$@"
