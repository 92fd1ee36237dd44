#!/usr/bin/env bash
# NBD servers stopped the way their users stop them, and started again well
# inside io_timeout, under fio verify-writes on a ublk NBD volume: nbdkit
# (SIGTERM: it answers the requests in flight with NBD_ESHUTDOWN, then closes),
# qemu-nbd (SIGTERM) and nbd-server (SIGTERM to the pid in its pid file) each
# lose no data and give fio no error; the volume counts the reconnects and no
# server error or timeout.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only newest "graceful stops are ridden out by the agent's reconnect; 60 and 61 kill and restart servers under fio on 6.12"

SERVER_PID=""
kill_server() { [[ -z "$SERVER_PID" ]] || kill -KILL "$SERVER_PID" 2>/dev/null || true; }

# start_SERVER: starts it on $WORK/nbd.sock serving $WORK/remote.img (export "disk"), sets
# SERVER_PID. The image is a file, so the data outlives the restart.
start_nbdkit() {
  rm -f "$WORK/nbd.sock"
  nbdkit -f -U "$WORK/nbd.sock" -e disk file "$WORK/remote.img" >>"$LOG_DIR/nbdkit.log" 2>&1 &
  SERVER_PID=$!
  wait_for "nbdkit on $WORK/nbd.sock" 30 unix_listening "$WORK/nbd.sock"
}

start_qemu_nbd() {
  rm -f "$WORK/nbd.sock"
  qemu-nbd -t -k "$WORK/nbd.sock" -f raw -x disk --shared=8 "$WORK/remote.img" \
    >>"$LOG_DIR/qemu-nbd.log" 2>&1 &
  SERVER_PID=$!
  wait_for "qemu-nbd on $WORK/nbd.sock" 30 unix_listening "$WORK/nbd.sock"
}

start_nbd_server() {
  rm -f "$WORK/nbd.sock" "$WORK/nbd-server.pid"
  cat >"$WORK/nbd-server.conf" <<CONF
[generic]
  user = root
  group = root
  unixsock = $WORK/nbd.sock
[disk]
  exportname = $WORK/remote.img
  flush = true
CONF
  nbd-server -C "$WORK/nbd-server.conf" -p "$WORK/nbd-server.pid" >>"$LOG_DIR/nbd-server.log" 2>&1
  wait_for "nbd-server's pid file" 30 test -s "$WORK/nbd-server.pid"
  SERVER_PID="$(cat "$WORK/nbd-server.pid")"
  wait_for "nbd-server on $WORK/nbd.sock" 30 unix_listening "$WORK/nbd.sock"
}

writes_done() {
  local stat
  read -ra stat <"/sys/block/${1#/dev/}/stat"
  echo "${stat[4]}"
}
writes_beyond() { (($(writes_done "$1") >= $2)); }
json_status() { ctl get-volume "$1" -o json | jq -r ".volume.status.$2 // \"0\" | tonumber"; }

# graceful_restart SERVER: a volume on SERVER, fio verify-writes on it while
# the server gets SIGTERM and is started again.
graceful_restart() {
  local server="$1" id="g-$1"
  step "$server stopped with SIGTERM and restarted under fio"
  truncate -s 0 "$WORK/remote.img"
  truncate -s 32M "$WORK/remote.img"
  "start_${server//-/_}"
  # A freshly started server may not greet the agent's probe in time on a loaded guest (seen
  # with nbd-server on 6.12): a refused create changes nothing, so it is simply asked again.
  wait_for "$server to serve the export" 60 ctl create-volume "$id" --size 32M --io-timeout 30 \
    --backend "nbd+unix:///disk?socket=$WORK/nbd.sock"
  local dev
  dev="$(volume_device "$id")"
  pick_fio_engine
  fio --name=graceful --filename="$dev" --direct=1 --ioengine="$fio_engine" --rw=randwrite \
    --bs=4k --iodepth=16 --size=6M --randrepeat=1 --verify=crc32c --verify_fatal=1 \
    --verify_backlog=256 --do_verify=1 --rate=1m >"$LOG_DIR/fio-$server.log" 2>&1 &
  local fio_pid=$!
  on_exit kill "$fio_pid"
  local writes
  writes="$(writes_done "$dev")"
  wait_for "writes to flow on $dev" 60 writes_beyond "$dev" $((writes + 64))
  process_gone "$fio_pid" && fail "fio ended before the restart; see fio-$server.log"
  kill -TERM "$SERVER_PID"
  wait_gone "$SERVER_PID" 20 || fail "$server did not exit on SIGTERM"
  echo "$server stopped"
  "start_${server//-/_}"
  local status=0
  wait "$fio_pid" || status=$?
  if ((status != 0)); then
    cat "$LOG_DIR/fio-$server.log" >&2
    fail "fio exited with status $status across the $server restart"
  fi
  grep -qE "err= *0" "$LOG_DIR/fio-$server.log" || fail "fio reported errors"
  echo "ok: fio wrote and verified 6M across the $server restart"
  local reconnects
  reconnects="$(json_status "$id" reconnects)"
  ((reconnects >= 1)) || fail "GetVolume shows $reconnects reconnects after the $server restart"
  expect_eq "server errors on $id" 0 "$(json_status "$id" serverErrors)"
  expect_eq "io timeouts on $id" 0 "$(json_status "$id" ioTimeouts)"
  ctl delete-volume "$id"
  kill -TERM "$SERVER_PID"
  wait_gone "$SERVER_PID" 20 || fail "$server did not exit on SIGTERM"
}

main() {
  local server
  for server in nbdkit qemu-nbd nbd-server; do
    command -v "$server" >/dev/null || fail "$server not found in the guest"
  done
  on_exit kill_server
  start_agent
  graceful_restart nbdkit
  graceful_restart qemu-nbd
  graceful_restart nbd-server
  stop_agent
}

main "$@"
