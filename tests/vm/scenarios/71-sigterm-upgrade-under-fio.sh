#!/usr/bin/env bash
# The upgrade path: SIGTERM (default --on-exit leave) while fio writes and
# verifies; the devices stay, their I/O waits, the next agent recovers them
# with the same numbers, and fio sees no error. Twice in one fio run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

main() {
  start_agent
  ctl create-volume upgraded --size 64M --backend "file://$WORK/upgraded.img"
  local dev
  dev="$(volume_device upgraded)"
  pick_fio_engine

  step "fio on $dev, restarting the agent under it"
  fio --name=pattern --filename="$dev" --direct=1 --ioengine="$fio_engine" --rw=randwrite \
    --bs=4k --iodepth=16 --size=32M --randrepeat=1 --verify=crc32c --verify_fatal=1 \
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
  echo "ok: fio wrote and verified 32M across 2 upgrades"

  ctl delete-volume upgraded
  stop_agent
  expect_eq "ublk devices at the end" 0 "$(find /dev -maxdepth 1 -name 'ublk[bc]*' | wc -l)"
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
