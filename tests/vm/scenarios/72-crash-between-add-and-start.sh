#!/usr/bin/env bash
# The agent is killed (-9) between ADD_DEV and START_DEV of a CreateVolume: strace
# injects SIGKILL into its open of the new device's char device, which comes
# after ADD_DEV and SET_PARAMS and before START_DEV (no hook in the agent). The
# next agent removes the half-created device, no stray device remains, and
# CreateVolume with the same id works.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

main() {
  start_agent --on-exit delete
  local pid="$AGENT_PID"
  strace -f -qq -p "$pid" -P /dev/ublkc0 -e trace=openat -e inject=openat:signal=KILL \
    -o "$LOG_DIR/72-strace.log" &
  local strace_pid=$!
  traced() { [[ "$(awk '$1 == "TracerPid:" { print $2 }' "/proc/$pid/status")" == "$strace_pid" ]]; }
  wait_for "strace to trace blkagent" 30 traced
  expect_fail "create-volume while the agent is killed" \
    ctl create-volume halfway --size 64M --backend "file://$WORK/halfway.img"
  wait_for "the agent to die at the open of /dev/ublkc0" 30 process_gone "$pid"
  local status=0
  wait "$pid" || status=$?
  AGENT_PID=""
  wait "$strace_pid" || true
  expect_eq "agent exit status (SIGKILL)" 137 "$status"
  expect_eq "half-created ublk devices" 1 "$(find /dev -maxdepth 1 -name 'ublkc*' | wc -l)"
  expect_eq "block devices of the half-created device" 0 \
    "$(find /dev -maxdepth 1 -name 'ublkb*' | wc -l)"

  step "restart: the half-created device is replaced"
  start_agent --on-exit delete
  expect_eq "ublk char devices after restart" 1 "$(find /dev -maxdepth 1 -name 'ublkc*' | wc -l)"
  ctl create-volume halfway --size 64M --backend "file://$WORK/halfway.img"
  local dev
  dev="$(volume_device halfway)"
  expect_eq "state" VOLUME_STATE_LIVE \
    "$(ctl get-volume halfway -o json | jq -r .volume.status.state)"
  fio_verify "$dev" 16M

  ctl delete-volume halfway
  stop_agent
  expect_eq "ublk devices at the end" 0 "$(find /dev -maxdepth 1 -name 'ublk[bc]*' | wc -l)"
}

main "$@"
