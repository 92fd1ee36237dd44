#!/usr/bin/env bash
# The agent dies between ADD_DEV and START_DEV of a CreateVolume (test hook
# BLK_TEST_CRASH_AFTER_ADD_DEV=1): the next agent removes the half-created
# device, no stray device remains, and CreateVolume with the same id works.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

main() {
  BLK_TEST_CRASH_AFTER_ADD_DEV=1 start_agent --on-exit delete
  local pid="$AGENT_PID"
  expect_fail "create-volume while the agent crashes" \
    ctl create-volume halfway --size 64M --backend "file://$WORK/halfway.img"
  wait_for "the agent to die in the hook" 30 process_gone "$pid"
  local status=0
  wait "$pid" || status=$?
  AGENT_PID=""
  expect_eq "agent exit status (the hook's)" 86 "$status"
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
