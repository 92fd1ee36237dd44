#!/usr/bin/env bash
# Deleting a volume whose device is in use is refused unless forced; forced, the
# device goes away, its user gets errors, and nothing hangs. A mount counts in
# the agent's mount namespace and in any other (a container's), named there.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

device_open_by_someone() {
  local link
  # -ef compares what the links point at without a readlink process per descriptor.
  for link in /proc/[0-9]*/fd/*; do
    [[ "$link" -ef "$1" ]] && return 0
  done
  return 1
}

start_agent
ctl create-volume busy --size 64M --queues 2 --backend "file://$WORK/busy.img"
dev="$(volume_device busy)"

step "fio running on $dev"
pick_fio_engine
fio --name=busy --filename="$dev" --direct=1 --ioengine="$fio_engine" --rw=randrw --bs=4k \
  --iodepth=8 --time_based --runtime=300 >"$LOG_DIR/fio-busy.log" 2>&1 &
fio_pid=$!
stop_fio() { kill -KILL "$fio_pid" 2>/dev/null || true; }
on_exit stop_fio
wait_for "fio to open $dev" 60 device_open_by_someone "$dev"

expect_fail_with "FAILED_PRECONDITION" "delete without --force while fio runs" \
  ctl delete-volume busy
expect_eq "state after the refused delete" VOLUME_STATE_LIVE \
  "$(ctl get-volume busy -o json | jq -r .volume.status.state)"
[[ -b "$dev" ]] || fail "$dev vanished after a refused delete"

step "delete --force"
ctl delete-volume busy --force
[[ ! -e "$dev" ]] || fail "$dev still exists after a forced delete"
wait_for "fio to end after the forced delete" 120 process_gone "$fio_pid"
fio_status=0
wait "$fio_pid" || fio_status=$?
((fio_status != 0)) || fail "fio reported success on a device deleted under it"
echo "ok: fio ended with status $fio_status"

if command -v mkfs.ext4 >/dev/null; then
  step "a mounted file system also counts as open"
  ctl create-volume mounted --size 64M --backend "file://$WORK/mounted.img"
  mdev="$(volume_device mounted)"
  mkfs.ext4 -q "$mdev"
  mkdir -p "$WORK/mnt"
  mount "$mdev" "$WORK/mnt"
  on_exit umount -l "$WORK/mnt"
  echo hello >"$WORK/mnt/hello"
  expect_fail_with "FAILED_PRECONDITION" "delete of a mounted volume" ctl delete-volume mounted
  umount "$WORK/mnt"
  ctl delete-volume mounted

  step "a mount in another mount namespace (a container's) counts too, and names it"
  ctl create-volume hidden --size 64M --backend "file://$WORK/hidden.img"
  hdev="$(volume_device hidden)"
  mkfs.ext4 -q "$hdev"
  mkdir -p "$WORK/hidden-mnt"
  unshare --mount --propagation private \
    sh -c "mount '$hdev' '$WORK/hidden-mnt' && exec sleep 600" &
  holder=$!
  stop_holder() { kill "$holder" 2>/dev/null || true; }
  on_exit stop_holder
  wait_for "the mount in the other namespace" 30 grep -q " $WORK/hidden-mnt " "/proc/$holder/mountinfo"
  ! grep -q " $WORK/hidden-mnt " /proc/self/mountinfo || fail "the mount is in the agent's namespace too"
  expect_fail_with "mounted at $WORK/hidden-mnt in the mount namespace of pid $holder \\(sleep\\)" \
    "delete of a volume mounted only in another mount namespace" ctl delete-volume hidden
  kill "$holder"
  wait_for "the other namespace to end" 30 process_gone "$holder"
  ctl delete-volume hidden
fi
stop_agent
