#!/usr/bin/env bash
# The upgrade path: SIGTERM (default --on-exit leave) while fio writes and
# verifies; the devices stay, their I/O waits, the next agent recovers them
# with the same numbers, and fio sees no error. Twice in one fio run, then once
# under unthrottled fio, where the agent must exit within 30s (it hands the
# backend nothing new once the stop began); and a forced DeleteVolume under
# unthrottled fio finishes within 30s.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

main() {
  start_agent
  ctl create-volume upgraded --size 64M --backend "file://$WORK/upgraded.img"
  local dev
  dev="$(volume_device upgraded)"
  pick_fio_engine

  step "fio on $dev, restarting the agent under it"
  # 20M at 384k/s: ~53 s of writes, for two restarts that take ~5 s each (more under load).
  fio --name=pattern --filename="$dev" --direct=1 --ioengine="$fio_engine" --rw=randwrite \
    --bs=4k --iodepth=16 --size=12M --randrepeat=1 --verify=crc32c --verify_fatal=1 \
    --verify_backlog=1024 --do_verify=1 --rate=384k >"$LOG_DIR/fio-upgrade.log" 2>&1 &
  local fio_pid=$!
  on_exit kill "$fio_pid"

  local round writes
  for round in 1 2; do
    writes="$(writes_done "$dev")"
    wait_for "writes to flow on $dev (round $round)" 60 writes_beyond_or_gone "$dev" $((writes + 64)) "$fio_pid"
    process_gone "$fio_pid" && fail "fio ended before restart $round (too fast for the test); see fio-upgrade.log"
    step "SIGTERM number $round"
    stop_agent
    [[ -b "$dev" ]] || fail "$dev is gone after SIGTERM; it should wait for the next agent"
    start_agent
    expect_eq "upgraded keeps its device after restart $round" "$dev" "$(volume_device upgraded)"
  done

  step "fio finishes without errors"
  local status=0
  wait "$fio_pid" || status=$?
  if ((status != 0)); then
    cat "$LOG_DIR/fio-upgrade.log" >&2
    fail "fio exited with status $status across the restarts"
  fi
  grep -qE "err= *0" "$LOG_DIR/fio-upgrade.log" || fail "fio reported errors; see fio-upgrade.log"
  echo "ok: fio wrote and verified 12M across 2 upgrades"

  step "SIGTERM under unthrottled fio (2 jobs, iodepth 64, randrw): the agent exits within 30s"
  fio --name=flood --filename="$dev" --direct=1 --ioengine="$fio_engine" --rw=randrw \
    --bs=4k --iodepth=64 --numjobs=2 --size=24M --offset_increment=24M --randrepeat=1 \
    --verify=crc32c --verify_fatal=1 --verify_backlog=1024 --do_verify=1 \
    >"$LOG_DIR/fio-flood.log" 2>&1 &
  fio_pid=$!
  on_exit kill "$fio_pid"
  writes="$(writes_done "$dev")"
  wait_for "unthrottled writes to flow on $dev" 60 writes_beyond_or_gone "$dev" $((writes + 256)) "$fio_pid"
  process_gone "$fio_pid" && fail "unthrottled fio ended before the SIGTERM (too fast for the test); see fio-flood.log"
  # fio's 128 requests fill the queue's 128 tags: the old agent holds every one when it exits.
  detach_within 30
  [[ -b "$dev" ]] || fail "$dev is gone after SIGTERM; it should wait for the next agent"
  start_agent
  expect_eq "upgraded keeps its device after the detach under load" "$dev" "$(volume_device upgraded)"
  echo "ok: the next agent serves $dev $(((${EPOCHREALTIME/./} - sigterm_us) / 1000)) ms after the SIGTERM"
  status=0
  wait "$fio_pid" || status=$?
  if ((status != 0)); then
    cat "$LOG_DIR/fio-flood.log" >&2
    fail "unthrottled fio exited with status $status across the restart"
  fi
  (($(grep -cE "err= *0" "$LOG_DIR/fio-flood.log") == 2)) ||
    fail "unthrottled fio reported errors; see fio-flood.log"
  echo "ok: unthrottled fio wrote and verified 2x24M across a detach"

  step "DeleteVolume --force under unthrottled fio finishes within 30s"
  ctl create-volume flooded --size 32M --backend "file://$WORK/flooded.img"
  local flooded_dev
  flooded_dev="$(volume_device flooded)"
  fio --name=flood --filename="$flooded_dev" --direct=1 --ioengine="$fio_engine" --rw=randrw \
    --bs=4k --iodepth=64 --numjobs=2 --size=16M --offset_increment=16M --time_based \
    --runtime=600 >"$LOG_DIR/fio-flood-delete.log" 2>&1 &
  local flood_pid=$!
  on_exit kill "$flood_pid"
  writes="$(writes_done "$flooded_dev")"
  wait_for "unthrottled writes to flow on $flooded_dev" 60 writes_beyond_or_gone "$flooded_dev" \
    $((writes + 256)) "$flood_pid"
  timeout 30 blkctl --socket "$AGENT_SOCKET" delete-volume flooded --force ||
    fail "delete-volume --force under unthrottled fio did not finish within 30s"
  [[ ! -e "$flooded_dev" ]] || fail "$flooded_dev still exists after delete-volume --force"
  kill "$flood_pid" 2>/dev/null || true
  wait "$flood_pid" 2>/dev/null || true
  echo "ok: the volume under unthrottled fio was deleted"

  ctl delete-volume upgraded
  stop_agent
  expect_eq "ublk devices at the end" 0 "$(find /dev -maxdepth 1 -name 'ublk[bc]*' | wc -l)"
}

# detach_within SECONDS: SIGTERM (devices left for the next agent); the agent must have exited
# within SECONDS, measured by the state-dir lock it holds until it exits. Sets sigterm_us.
detach_within() {
  local pid="$AGENT_PID" status=0
  sigterm_us="${EPOCHREALTIME/./}"
  kill -TERM "$pid"
  timeout "$1" flock "$AGENT_STATE_DIR/lock" true ||
    fail "blkagent (pid $pid) did not exit within $1s of SIGTERM under load"
  wait "$pid" || status=$?
  AGENT_PID=""
  ((status == 0)) || fail "blkagent exited with status $status after SIGTERM (want 0)"
  echo "ok: blkagent exited $(((${EPOCHREALTIME/./} - sigterm_us) / 1000)) ms after SIGTERM"
}

writes_done() {
  local stat
  read -ra stat <"/sys/block/${1#/dev/}/stat"
  echo "${stat[4]}"
}

# writes_beyond_or_gone DEV COUNT FIO_PID: DEV completed COUNT writes, or fio ended.
writes_beyond_or_gone() {
  (($(writes_done "$1") >= $2)) || process_gone "$3"
}

main "$@"
