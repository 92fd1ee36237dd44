#!/usr/bin/env bash
# A fail-fast volume: while no agent serves it, I/O fails at once instead of
# waiting for the next agent; a default volume beside it holds its I/O and
# completes it after the restart.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

main() {
  start_agent --on-exit delete
  ctl create-volume quick --size 32M --fail-fast --backend "file://$WORK/quick.img"
  ctl create-volume patient --size 32M --backend "file://$WORK/patient.img"
  expect_eq "fail fast shown" true "$(ctl get-volume quick -o json | jq -r .volume.failFast)"
  local quick patient
  quick="$(volume_device quick)"
  patient="$(volume_device patient)"
  fio_write_pattern "$patient" 8M

  step "agent killed: the fail-fast volume errors at once"
  kill_agent
  expect_fail "a read of the fail-fast volume with no agent" \
    timeout 60 dd if="$quick" of=/dev/null bs=4k count=1 iflag=direct status=none

  step "the default volume holds a read until the agent is back"
  dd if="$patient" of="$WORK/held-read" bs=4k count=1 iflag=direct status=none &
  local reader=$!
  on_exit kill -KILL "$reader"
  process_gone "$reader" && fail "a read of the default volume completed with no agent"
  start_agent --on-exit delete
  wait_for "the held read to complete" 60 process_gone "$reader"
  wait "$reader" || fail "the held read failed after the agent came back"
  echo "ok: the held read completed after the restart"
  fio_check_pattern "$patient" 8M

  step "the fail-fast volume is served again"
  wait_for "quick to be live" 60 bash -c \
    "blkctl --socket '$AGENT_SOCKET' get-volume quick -o json | jq -e '.volume.status.state == \"VOLUME_STATE_LIVE\"'"
  dd if="$(volume_device quick)" of=/dev/null bs=4k count=1 iflag=direct status=none ||
    fail "the fail-fast volume does not serve reads after the restart"

  ctl delete-volume quick --force
  ctl delete-volume patient
  stop_agent
}
main "$@"
