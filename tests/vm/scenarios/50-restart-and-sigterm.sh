#!/usr/bin/env bash
# SIGTERM with --on-exit delete stops every device and leaves nothing behind;
# a restarted agent brings the persisted volumes back with their data. (The
# default, leaving devices for the next agent, is 71-sigterm-upgrade-under-fio.)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start_agent --on-exit delete
ctl create-volume persist --size 64M --queues 2 --backend "file://$WORK/persist.img"
ctl create-volume scratch --size 64M --backend null://
fio_write_pattern "$(volume_device persist)" 32M

step "SIGTERM"
stop_agent
expect_eq "ublk devices after SIGTERM" 0 "$(find /dev -maxdepth 1 -name 'ublk[bc]*' | wc -l)"
expect_eq "blkagent processes after SIGTERM" 0 "$(pgrep -c -x blkagent || true)"
[[ ! -e "$AGENT_SOCKET" ]] || fail "the socket is still there after SIGTERM"

step "restart: the volumes come back"
start_agent --on-exit delete
expect_eq "volumes after restart" "persist,scratch" \
  "$(ctl list-volumes -o json | jq -r '[.volumes[] | select(.status.state == "VOLUME_STATE_LIVE") | .id] | join(",")')"
fio_check_pattern "$(volume_device persist)" 32M

ctl delete-volume persist
ctl delete-volume scratch
stop_agent
expect_eq "ublk devices at the end" 0 "$(find /dev -maxdepth 1 -name 'ublk[bc]*' | wc -l)"
