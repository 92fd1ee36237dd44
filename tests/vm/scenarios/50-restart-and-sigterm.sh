#!/usr/bin/env bash
# SIGTERM with --on-exit delete stops every device and leaves nothing behind;
# a restarted agent brings the persisted volumes back with their data; one
# whose image file is missing (a file system not mounted yet after a reboot)
# stays degraded, is not re-created empty, and comes back when the file does. (The
# default, leaving devices for the next agent, is 71-sigterm-upgrade-under-fio.)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only lts "restoring persisted volumes is the agent's; 70 and 71 recover devices on both kernels"

start_agent --on-exit delete
ctl create-volume persist --size 64M --queues 2 --backend "file://$WORK/persist.img"
ctl create-volume scratch --size 64M --backend null://
fio_write_pattern "$(volume_device persist)" 16M

step "SIGTERM"
stop_agent
expect_eq "ublk devices after SIGTERM" 0 "$(find /dev -maxdepth 1 -name 'ublk[bc]*' | wc -l)"
expect_eq "blkagent processes after SIGTERM" 0 "$(pgrep -c -x blkagent || true)"
[[ ! -e "$AGENT_SOCKET" ]] || fail "the socket is still there after SIGTERM"

live_volumes() {
  ctl list-volumes -o json | jq -r '[.volumes[] | select(.status.state == "VOLUME_STATE_LIVE") | .id] | join(",")'
}

# As after a reboot whose file system with the images is not mounted yet: the volume must wait,
# degraded, for its data, never be re-created over an empty file.
step "restart with persist's image gone: degraded, nothing re-created"
mv "$WORK/persist.img" "$WORK/persist.img.away"
start_agent --on-exit delete
expect_eq "live volumes without persist's image" "scratch" "$(live_volumes)"
expect_eq "persist's state" "VOLUME_STATE_DEGRADED" \
  "$(ctl get-volume persist -o json | jq -r .volume.status.state)"
ctl get-volume persist -o json | jq -r .volume.status.message | grep -q "not re-created empty" ||
  fail "persist's degraded message does not say why: $(ctl get-volume persist -o json)"
[[ ! -e "$WORK/persist.img" ]] || fail "the agent created a new, empty persist.img"

step "the image is back: persist comes back by itself, with its data"
mv "$WORK/persist.img.away" "$WORK/persist.img"
all_live() { [[ "$(live_volumes)" == "persist,scratch" ]]; }
wait_for "persist live again" 90 all_live
fio_check_pattern "$(volume_device persist)" 16M
stop_agent

step "restart: the volumes come back"
start_agent --on-exit delete
expect_eq "volumes after restart" "persist,scratch" "$(live_volumes)"
fio_check_pattern "$(volume_device persist)" 16M

# A degraded volume's device that the killed agent left is still the application's: a delete
# without --force refuses while it is open, as for a live volume, and removes it once closed.
step "kill -9, restart with persist's image gone: deleting its open device needs --force"
dev="$(volume_device persist)"
kill_agent
mv "$WORK/persist.img" "$WORK/persist.img.away"
start_agent --on-exit delete
expect_eq "persist's state" "VOLUME_STATE_DEGRADED" \
  "$(ctl get-volume persist -o json | jq -r .volume.status.state)"
[[ -b "$dev" ]] || fail "the killed agent's $dev is gone: nothing to protect"
# Opening does no I/O (nothing serves the device): the holder stays until killed.
(exec 3<"$dev" && exec sleep 600) &
holder=$!
stop_holder() { kill -KILL "$holder" 2>/dev/null || true; }
on_exit stop_holder
holds_open() { [[ "$(readlink "/proc/$holder/fd/3" 2>/dev/null)" == "$dev" ]]; }
wait_for "a process holding $dev open" 10 holds_open
expect_fail_with "in use" "delete of the degraded, open persist without --force" ctl delete-volume persist
[[ -b "$dev" ]] || fail "the refused delete removed $dev"
expect_eq "persist's state after the refusal" "VOLUME_STATE_DEGRADED" \
  "$(ctl get-volume persist -o json | jq -r .volume.status.state)"
kill -KILL "$holder"
wait_gone "$holder" 10 || fail "the holder of $dev survived SIGKILL"
ctl delete-volume persist
[[ ! -e "$dev" ]] || fail "$dev is still there after the delete"
mv "$WORK/persist.img.away" "$WORK/persist.img"

ctl delete-volume scratch
stop_agent
expect_eq "ublk devices at the end" 0 "$(find /dev -maxdepth 1 -name 'ublk[bc]*' | wc -l)"
