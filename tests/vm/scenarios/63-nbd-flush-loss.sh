#!/usr/bin/env bash
# A server with a volatile write cache that crashes (nbdkit's cache filter,
# cache=writeback: writes reach the image only at a FLUSH, and kill -9 loses the
# rest): what a FLUSH made durable survives; writes acknowledged but not flushed
# are lost with the server, and the first fsync of the device after the crash
# fails with EIO instead of claiming they are durable; the next succeeds. The
# loss is counted in GetVolume and /metrics. The cache filter offers multi-conn: on a volume of two
# queues (a connection each) a write from CPU 1 (queue 1) lost with the server fails the next
# fsync from CPU 0 (queue 0), and a write a FLUSH on queue 0 covered is no loss at queue 1's drop.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only lts "flush and write-loss accounting are the agent's"

SERVER_PID=""
kill_server() { [[ -z "$SERVER_PID" ]] || kill -KILL "$SERVER_PID" 2>/dev/null || true; }

start_server() {
  rm -f "$WORK/cache.sock"
  # The cache is an unlinked file in $TMPDIR (default /var/tmp, read-only in the guest).
  TMPDIR="$WORK" nbdkit -f -U "$WORK/cache.sock" --filter=cache file "$WORK/cached.img" cache=writeback \
    >>"$LOG_DIR/nbdkit-cache.log" 2>&1 &
  SERVER_PID=$!
  wait_for "nbdkit on $WORK/cache.sock" 30 unix_listening "$WORK/cache.sock"
}

crash_server() {
  kill -KILL "$SERVER_PID"
  wait_gone "$SERVER_PID" 10 || fail "nbdkit survived SIGKILL"
}

VOLUME=c1 # whose reconnects count
reconnects() { ctl get-volume "$VOLUME" -o json | jq -r '.volume.status.reconnects // "0" | tonumber'; }
reconnected_since() { (($(reconnects) > $1)); }
losses() { ctl get-volume "$VOLUME" -o json | jq -r '.volume.status.unflushedLosses // "0" | tonumber'; }
# on_cpu CPU COMMAND...: runs a command (or a function) pinned to CPU, so its I/O goes down the
# queue of that CPU.
on_cpu() { (taskset -cp "$1" "$BASHPID" >/dev/null && "${@:2}"); }

# write_mib DEV MIB BYTE: one MiB of BYTE at MiB offset MIB, O_DIRECT, no flush. One full block:
# dd fsyncs its output when it turns O_DIRECT off for a short one (a partial read from the pipe).
write_mib() {
  head -c 1M /dev/zero | tr '\0' "\\$(printf '%03o' "$3")" |
    dd of="$1" bs=1M seek="$2" iflag=fullblock oflag=direct status=none
}

# mib_is DEV MIB BYTE: the MiB at MIB holds only BYTE (read past the page cache).
mib_is() {
  local expected
  expected="$(head -c 1M /dev/zero | tr '\0' "\\$(printf '%03o' "$3")" | md5sum)"
  [[ "$(dd if="$1" bs=1M skip="$2" count=1 iflag=direct status=none | md5sum)" == "$expected" ]]
}

main() {
  command -v nbdkit >/dev/null || fail "nbdkit not found in the guest"
  truncate -s 16M "$WORK/cached.img"
  on_exit kill_server
  start_server
  start_agent --metrics-address 127.0.0.1:9477
  ctl create-volume c1 --size 16M --backend "nbd+unix:///?socket=$WORK/cache.sock"
  local dev before
  dev="$(volume_device c1)"

  step "a flushed write survives the server's crash"
  write_mib "$dev" 0 0xA1
  sync "$dev" || fail "fsync of $dev failed with the server up"
  before="$(reconnects)"
  crash_server
  start_server
  mib_is "$dev" 0 0xA1 || fail "the flushed MiB did not survive the crash"
  wait_for "the agent's reconnect" 30 reconnected_since "$before"
  sync "$dev" || fail "fsync failed after a crash that lost nothing"
  echo "ok: flushed data intact, the next fsync succeeds"

  step "an acknowledged, unflushed write dies with the server's cache: fsync says EIO once"
  write_mib "$dev" 1 0xB2
  before="$(reconnects)"
  crash_server
  start_server
  wait_for "the agent's reconnect" 30 reconnected_since "$before"
  expect_fail_with "Input/output error" "fsync after the server lost an acknowledged write" \
    sync "$dev"
  mib_is "$dev" 1 0x00 || fail "the lost MiB reads back as something else than the image's zeroes"
  mib_is "$dev" 0 0xA1 || fail "the flushed MiB changed"
  sync "$dev" || fail "the fsync after the one that reported the loss failed"
  echo "ok: the loss was reported to the first fsync, and only to it"

  step "counted in GetVolume and /metrics"
  expect_eq "GetVolume unflushedLosses" 1 \
    "$(ctl get-volume c1 -o json | jq -r '.volume.status.unflushedLosses // "0" | tonumber')"
  ctl get-volume c1 | grep -qE '^flush losses: +1$' || fail "get-volume shows no flush loss"
  expect_eq "/metrics unflushed_loss" 1 "$(curl -fsS http://127.0.0.1:9477/metrics |
    awk '$1 == "blk_volume_backend_errors_total{volume=\"c1\",kind=\"unflushed_loss\"}" { print $2 }')"

  ctl delete-volume c1

  step "multi-conn, 2 queues: a write from CPU 1 lost with the server fails the fsync from CPU 0"
  VOLUME=c2
  ctl create-volume c2 --size 16M --queues 2 --backend "nbd+unix:///?socket=$WORK/cache.sock"
  dev="$(volume_device c2)"
  on_cpu 1 write_mib "$dev" 2 0xC3
  before="$(reconnects)"
  crash_server
  start_server
  wait_for "the agent's reconnect" 30 reconnected_since "$before"
  expect_fail_with "Input/output error" "fsync on CPU 0 after the server lost queue 1's write" \
    on_cpu 0 sync "$dev"
  mib_is "$dev" 2 0x00 || fail "the lost MiB reads back as something else than the image's zeroes"
  on_cpu 1 sync "$dev" || fail "queue 1's fsync reported the loss again"
  expect_eq "c2's unflushedLosses" 1 "$(losses)"
  echo "ok: reported once, to the queue that asked"

  step "multi-conn: a FLUSH on queue 0 covers queue 1's write; its drop loses nothing"
  on_cpu 1 write_mib "$dev" 3 0xD4
  on_cpu 0 sync "$dev" || fail "fsync on CPU 0 failed with the server up"
  before="$(reconnects)"
  crash_server
  start_server
  mib_is "$dev" 3 0xD4 || fail "queue 1's write, flushed on queue 0, did not survive the crash"
  wait_for "the agent's reconnect" 30 reconnected_since "$before"
  on_cpu 1 sync "$dev" || fail "fsync on CPU 1 failed after a crash that lost nothing"
  on_cpu 0 sync "$dev" || fail "fsync on CPU 0 failed after a crash that lost nothing"
  expect_eq "c2's unflushedLosses" 1 "$(losses)"
  echo "ok: nothing reported lost"
  ctl delete-volume c2
  stop_agent
}

main "$@"
