#!/usr/bin/env bash
# Corrupted and truncated state files: the agent starts, reports them, uses the
# previous good version of a record where there is one, and keeps the others.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only lts "state files are the agent's"

main() {
  start_agent --on-exit delete
  ctl create-volume kept --size 64M --backend "file://$WORK/kept.img"
  ctl create-volume torn --size 64M --backend "file://$WORK/torn.img"
  ctl create-volume garbled --size 64M --backend null://
  fio_write_pattern "$(volume_device torn)" 16M
  stop_agent

  local records="$AGENT_STATE_DIR/volumes"
  step "tear torn.json (a previous good version exists) and garble garbled.json (none)"
  cp "$records/torn.json" "$records/torn.json.prev"
  truncate -s 40 "$records/torn.json"
  printf 'blkagent-volume 2 device=9 fnv1a64=0\n{"id": "garbled"' >"$records/garbled.json"

  start_agent --on-exit delete
  expect_eq "live volumes" "kept,torn" \
    "$(ctl list-volumes -o json | jq -r '[.volumes[] | select(.status.state == "VOLUME_STATE_LIVE") | .id] | join(",")')"
  grep -q "torn.json.*previous version" "$LOG_DIR/blkagent.log" ||
    fail "the agent did not report the torn record"
  grep -q "garbled.json" "$LOG_DIR/blkagent.log" ||
    fail "the agent did not report the garbled record"
  fio_check_pattern "$(volume_device torn)" 16M

  ctl delete-volume kept
  ctl delete-volume torn
  stop_agent
  expect_eq "ublk devices at the end" 0 "$(find /dev -maxdepth 1 -name 'ublk[bc]*' | wc -l)"
}

main "$@"
