#!/usr/bin/env bash
# Online growth (issue 12). Where the kernel offers UBLK_F_UPDATE_SIZE (7.3): blkctl
# resize-volume grows a raw file-backed volume while it is open (/sys/block/ublkbN/size, the
# backing file, the record), shrinking is refused, the same size again changes nothing, and the
# agent killed -9 afterwards recovers the device at the new size with the data before and after
# the old end intact; then blk-csi NodeExpandVolume grows a published ext4 volume: df shows the
# new size and the file written before reads back; unstaged and staged again with the volume
# context's old size, the device, the volume and df keep the grown size and the file. Where it does not (6.12): the resize is
# refused FAILED_PRECONDITION naming the feature, and the device, the file and the record keep
# their size.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/csi_lib.sh"

MiB=$((1 << 20))

device_bytes() { echo $(($(cat "/sys/block/$(basename "$1")/size") * 512)); }
volume_bytes() { ctl get-volume "$1" -o json | jq -r '.volume.sizeBytes'; }
# The spec's size in the persisted record (after its header line).
record_bytes() { tail -n +2 "$AGENT_STATE_DIR/volumes/$1.json" | jq -r '.sizeBytes // .size_bytes'; }
file_bytes() { stat -c %s "$1"; }

start_agent
features="$(ctl node-info -o json | jq -r '.ublkFeatures // "0"')"
update_size=false
if (((features >> 10) & 1)); then update_size=true; fi
echo "kernel $(uname -r): UBLK_F_UPDATE_SIZE offered: $update_size"

step "a raw volume of 32 MiB, open, with a pattern at its start and its end"
raw_image="$WORK/raw.img"
ctl create-volume raw --size 32M --backend "file://$raw_image" >/dev/null
raw_dev="$(volume_device raw)"
head -c $((4 * MiB)) /dev/urandom >"$WORK/head"
head -c $((4 * MiB)) /dev/urandom >"$WORK/tail"
dd if="$WORK/head" of="$raw_dev" bs=1M oflag=direct conv=fsync status=none
dd if="$WORK/tail" of="$raw_dev" bs=1M seek=28 oflag=direct conv=fsync status=none
exec {holder}<"$raw_dev" # an opener through the resize: growing must not need the device closed
expect_eq "device size" $((32 * MiB)) "$(device_bytes "$raw_dev")"

if [[ "$update_size" != true ]]; then
  step "no UPDATE_SIZE: refused, nothing changed"
  expect_fail_with "FAILED_PRECONDITION.*UBLK_F_UPDATE_SIZE" "resize without UPDATE_SIZE" \
    ctl resize-volume raw --size 64M
  expect_eq "device size" $((32 * MiB)) "$(device_bytes "$raw_dev")"
  expect_eq "volume size" $((32 * MiB)) "$(volume_bytes raw)"
  expect_eq "record size" $((32 * MiB)) "$(record_bytes raw)"
  expect_eq "backing file size" $((32 * MiB)) "$(file_bytes "$raw_image")"
  exec {holder}<&-
  ctl delete-volume raw >/dev/null
  stop_agent
  exit 0
fi

step "refusals: shrinking, a size off the block size, an unknown volume"
expect_fail_with INVALID_ARGUMENT "shrink" ctl resize-volume raw --size 16M
expect_fail_with INVALID_ARGUMENT "not a multiple of 512" ctl resize-volume raw --size 33554500
expect_fail_with NOT_FOUND "unknown volume" ctl resize-volume nope --size 64M
expect_eq "device size after refusals" $((32 * MiB)) "$(device_bytes "$raw_dev")"

step "grow to 64 MiB while open, then the same size again"
ctl resize-volume raw --size 64M >/dev/null
expect_eq "device size" $((64 * MiB)) "$(device_bytes "$raw_dev")"
expect_eq "volume size" $((64 * MiB)) "$(volume_bytes raw)"
expect_eq "record size" $((64 * MiB)) "$(record_bytes raw)"
expect_eq "backing file size" $((64 * MiB)) "$(file_bytes "$raw_image")"
ctl resize-volume raw --size 64M >/dev/null || fail "the same size again failed"
expect_eq "device size after the same size again" $((64 * MiB)) "$(device_bytes "$raw_dev")"
head -c $((4 * MiB)) /dev/urandom >"$WORK/grown"
dd if="$WORK/grown" of="$raw_dev" bs=1M seek=56 oflag=direct conv=fsync status=none
exec {holder}<&-

step "agent killed -9 and restarted: the device is recovered at 64 MiB, data intact"
kill_agent
start_agent
wait_for "raw live again" 60 bash -c \
  "blkctl --socket '$AGENT_SOCKET' get-volume raw -o json | jq -e '.volume.status.state == \"VOLUME_STATE_LIVE\"' >/dev/null"
expect_eq "device size after recovery" $((64 * MiB)) "$(device_bytes "$raw_dev")"
expect_eq "volume size after recovery" $((64 * MiB)) "$(volume_bytes raw)"
dd if="$raw_dev" bs=1M count=4 iflag=direct status=none | cmp - "$WORK/head" || fail "head lost"
dd if="$raw_dev" bs=1M skip=28 count=4 iflag=direct status=none | cmp - "$WORK/tail" ||
  fail "the old end lost"
dd if="$raw_dev" bs=1M skip=56 count=4 iflag=direct status=none | cmp - "$WORK/grown" ||
  fail "the grown part lost"
echo "ok: all three patterns read back"
ctl delete-volume raw >/dev/null

step "CSI: NodeExpandVolume grows a published ext4 volume online"
mkdir -p "$WORK/csi"
blk-csi --endpoint "unix://$CSI_SOCKET" --agent-socket "$AGENT_SOCKET" --node-id vm-node \
  --kubelet-root "$WORK" >>"$LOG_DIR/blk-csi.log" 2>&1 &
CSI_PID=$!
on_exit stop_csi
on_exit unmount_all
wait_for "blk-csi on $CSI_SOCKET" 30 unix_listening "$CSI_SOCKET"
expect_eq "EXPAND_VOLUME capability" 1 "$(csi NodeGetCapabilities | grep -c 'type: EXPAND_VOLUME')"
cap='volume_capability { mount { fs_type: "ext4" } access_mode { mode: SINGLE_NODE_WRITER } }'
staging="$WORK/staging/vfs" pod="$WORK/pods/a/mount"
truncate -s 64M "$WORK/fs.img"
context="volume_context { key: \"backend\" value: \"file://$WORK/fs.img\" }"
context+=' volume_context { key: "size" value: "64Mi" }'
csi NodeStageVolume "volume_id: \"vfs\" staging_target_path: \"$staging\" $cap $context" >/dev/null
csi NodePublishVolume \
  "volume_id: \"vfs\" staging_target_path: \"$staging\" target_path: \"$pod\" $cap" >/dev/null
echo "written before the expansion" >"$pod/data"
sync
before_kib="$(df -k --output=size "$pod" | tail -n1)"
expect_fail_with NOT_FOUND "expand of an unknown volume" csi NodeExpandVolume \
  "volume_id: \"nope\" volume_path: \"$pod\" capacity_range { required_bytes: $((128 * MiB)) }"
expect_fail_with INVALID_ARGUMENT "expand without volume_path" csi NodeExpandVolume \
  "volume_id: \"vfs\" capacity_range { required_bytes: $((128 * MiB)) }"
expanded="$(csi NodeExpandVolume \
  "volume_id: \"vfs\" volume_path: \"$pod\" capacity_range { required_bytes: $((128 * MiB)) } $cap")"
expect_eq "capacity_bytes" "capacity_bytes: $((128 * MiB))" "$expanded"
after_kib="$(df -k --output=size "$pod" | tail -n1)"
echo "df size: ${before_kib} KiB -> ${after_kib} KiB"
((after_kib > before_kib + 50 * 1024)) || fail "df did not grow by the 64 MiB added"
expect_eq "file written before" "written before the expansion" "$(cat "$pod/data")"
csi NodeUnpublishVolume "volume_id: \"vfs\" target_path: \"$pod\"" >/dev/null
csi NodeUnstageVolume "volume_id: \"vfs\" staging_target_path: \"$staging\"" >/dev/null

step "CSI: restaged with the provisioned size (64Mi) in the context, the volume keeps 128 MiB"
# Kubernetes never updates the volume context after an expansion: a device made at the context's
# size would sit under a 128 MiB filesystem.
csi NodeStageVolume "volume_id: \"vfs\" staging_target_path: \"$staging\" $cap $context" >/dev/null
csi NodeStageVolume "volume_id: \"vfs\" staging_target_path: \"$staging\" $cap $context" >/dev/null ||
  fail "a repeated stage of the grown volume failed"
expect_eq "device size after restage" $((128 * MiB)) "$(device_bytes "$(volume_device vfs)")"
expect_eq "volume size after restage" $((128 * MiB)) "$(volume_bytes vfs)"
csi NodePublishVolume \
  "volume_id: \"vfs\" staging_target_path: \"$staging\" target_path: \"$pod\" $cap" >/dev/null
expect_eq "df size after restage (KiB)" "$after_kib" "$(df -k --output=size "$pod" | tail -n1)"
expect_eq "file written before, after restage" "written before the expansion" "$(cat "$pod/data")"
csi NodeUnpublishVolume "volume_id: \"vfs\" target_path: \"$pod\"" >/dev/null
csi NodeUnstageVolume "volume_id: \"vfs\" staging_target_path: \"$staging\"" >/dev/null
stop_csi
stop_agent
