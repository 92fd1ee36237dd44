#!/usr/bin/env bash
# The demo itself (needs root and ublk): agent up, a file and a null volume, fio write + verify,
# list, delete, agent down. Usage: demo-volumes.sh BIN_DIR
set -euo pipefail
bin="${1:?usage: demo-volumes.sh BIN_DIR}"
work="$(mktemp -d /tmp/blk-demo.XXXXXX)"
export BLKCTL_SOCKET="$work/blkagent.sock"
agent_pid=""

blkctl() { "$bin/blkctl" "$@"; }
step() { printf '\n== %s\n' "$*"; }

cleanup() {
  if [[ -n "$agent_pid" ]] && kill -0 "$agent_pid" 2>/dev/null; then
    # Those the demo did not get to are no error; any other failure is shown.
    for volume in demo-file demo-null; do
      blkctl delete-volume "$volume" --force --if-exists >/dev/null || echo "demo: $volume not deleted"
    done
    kill -TERM "$agent_pid" && wait "$agent_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

step "starting blkagent (socket $BLKCTL_SOCKET)"
"$bin/blkagent" --socket "$BLKCTL_SOCKET" --state-dir "$work/state" 2>"$work/agent.log" &
agent_pid=$!
deadline=$((SECONDS + 30))
until [[ -S "$BLKCTL_SOCKET" ]]; do
  if ((SECONDS > deadline)) || ! kill -0 "$agent_pid" 2>/dev/null; then
    cat "$work/agent.log" >&2
    echo "demo: blkagent did not start" >&2
    exit 1
  fi
  sleep 0.1
done

step "blkctl node-info"
blkctl node-info

step "blkctl create-volume demo-file --size 256M --backend file://$work/demo-file.img --queues 2"
blkctl create-volume demo-file --size 256M --backend "file://$work/demo-file.img" --queues 2
step "blkctl create-volume demo-null --size 1G --backend null://"
blkctl create-volume demo-null --size 1G --backend null://

step "blkctl list-volumes"
blkctl list-volumes

dev="$(blkctl get-volume demo-file -o json | jq -r .volume.status.devicePath)"
step "fio: random writes with crc32c checksums on $dev, then a verify-only read pass"
common=(--filename="$dev" --bs=4k --size=64M --iodepth=16 --ioengine=io_uring --direct=1
        --verify=crc32c --verify_state_save=0 --randrepeat=1 --group_reporting)
fio --name=write "${common[@]}" --rw=randwrite --do_verify=1 --output-format=terse >/dev/null
fio --name=verify "${common[@]}" --rw=randwrite --verify_only=1 --output-format=normal |
  grep -E "^ *(read|write|READ|WRITE)|err=" || true
echo "data verified"

null_dev="$(blkctl get-volume demo-null -o json | jq -r .volume.status.devicePath)"
step "fio: 5 s of 4k random reads on $null_dev"
fio --name=null-read --filename="$null_dev" --rw=randread --bs=4k --iodepth=32 --ioengine=io_uring \
  --direct=1 --time_based --runtime=5 --output-format=normal | grep -E "IOPS=" || true

step "blkctl delete-volume demo-file; blkctl delete-volume demo-null"
blkctl delete-volume demo-file
blkctl delete-volume demo-null
blkctl list-volumes

step "stopping blkagent"
kill -TERM "$agent_pid"
wait "$agent_pid"
agent_pid=""
echo "demo finished: no ublk devices left: $(ls /dev/ublkb* 2>/dev/null | wc -l) remaining"
