#!/usr/bin/env bash
# NBD faults counted per volume: errors the server returns (nbdkit's error
# filter) show in `blkctl get-volume` (text and JSON) and in /metrics as
# blk_volume_backend_errors_total{kind="server"}, and only for that volume.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

scrape() { curl -fsS "http://127.0.0.1:9477/metrics"; }
metric() { scrape | awk -v m="$1" '$1 == m { print $2 }'; }
json_status() { ctl get-volume "$1" -o json | jq -r ".volume.status.$2 // \"0\" | tonumber"; }

read_block() { dd if="$1" of=/dev/null bs=4k count=1 skip="$2" iflag=direct status=none; }

server_errors_are_counted() {
  step "a server returning EIO: the error reaches the reader and is counted"
  nbdkit -f -U "$WORK/err.sock" --filter=error memory 16M error=EIO error-rate=100% \
    error-file="$WORK/inject" >>"$LOG_DIR/nbdkit-err.log" 2>&1 &
  local pid=$!
  on_exit kill -KILL "$pid"
  wait_for "nbdkit on $WORK/err.sock" 30 test -S "$WORK/err.sock"
  ctl create-volume e1 --size 16M --backend "nbd+unix:///?socket=$WORK/err.sock"
  ctl create-volume quiet --size 16M --backend null://
  local dev
  dev="$(volume_device e1)"
  read_block "$dev" 10 || fail "a read before the injection failed"
  expect_eq "server errors before the injection" 0 "$(json_status e1 serverErrors)"

  touch "$WORK/inject"
  expect_fail_with "Input/output error" "a read while the server fails" read_block "$dev" 20
  expect_fail_with "Input/output error" "another read while the server fails" read_block "$dev" 30
  rm "$WORK/inject"
  read_block "$dev" 40 || fail "a read after the injection failed"

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
  scrape | grep -q '^blk_volume_backend_errors_total{volume="quiet"' &&
    fail "/metrics has NBD error series for a null volume"
  echo "ok: no NBD error series for the null volume"
  ctl delete-volume quiet
  ctl delete-volume e1
}

main() {
  command -v nbdkit >/dev/null || fail "nbdkit not found in the guest"
  start_agent --metrics-address 127.0.0.1:9477
  server_errors_are_counted
  stop_agent
}

main "$@"
