#!/usr/bin/env bash
# blk-csi driven as a kubelet drives it, over gRPC (blk_csi_client), on the
# real agent: identity and capabilities; a filesystem volume (file backend)
# staged (mkfs + mount), published at two targets plus a read-only one,
# written, the agent killed -9 and restarted underneath, unpublished,
# unstaged (the agent volume deleted), staged again with its data still
# there (a stage whose file is missing refused, nothing created); a raw block volume the same way with dd; every call made twice
# (idempotent); missing required fields, a conflicting restage and an unstage
# of a still-published volume refused with the spec's codes; a disk holding a
# partition table neither formatted nor mounted (its bytes unchanged, no
# agent volume left); read-only: a
# reader-only access mode stages the volume read-only (ro mount, ro device), a
# readonly publish of a raw block volume staged read-write refuses the pod's
# writes (a read-only loop device) while a read-write publish still writes,
# and leaves no loop device behind (one left unmounted, as a blk-csi stopped
# between two steps leaves it, goes at the unstage). The controller
# (--controller): CreateVolume of a file-pool StorageClass makes the claim's
# file, twice the same answer; a second claim of the class gets a file of its
# own, both staged and written at once; a class whose claims would share one
# backing refused with nothing made; ControllerModifyVolume (a
# VolumeAttributesClass change) sets a staged volume's read IOPS limit at once
# (fio stays under it) and a restage keeps it; DeleteVolume refused while
# staged, removes the file and its record, idempotent.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/csi_lib.sh"
one_kernel_only newest "blk-csi calls the agent; 70 checks kill -9 recovery on both kernels"



# The same call twice: both must succeed (CSI calls are idempotent).
csi_twice() {
  csi "$@" >/dev/null || fail "$1 failed"
  csi "$@" >/dev/null || fail "$1 failed when repeated"
  echo "ok: $1 twice"
}

mounted() { mountpoint -q "$1"; }

context() { # backend-uri size
  echo "volume_context { key: \"backend\" value: \"$1\" } volume_context { key: \"size\" value: \"$2\" }"
}
stage_request() { # id kind backend size [access mode]
  echo "volume_id: \"$1\" staging_target_path: \"$WORK/staging/$1\" $(capability "$2" "${5:-}") $(context "$3" "$4")"
}
unstage_request() { echo "volume_id: \"$1\" staging_target_path: \"$WORK/staging/$1\""; }
publish_request() { # id kind target [readonly]
  echo "volume_id: \"$1\" staging_target_path: \"$WORK/staging/$1\" target_path: \"$3\"" \
    "$(capability "$2") readonly: ${4:-false}"
}
unpublish_request() { echo "volume_id: \"$1\" target_path: \"$2\""; }
agent_volumes() { ctl list-volumes -o json | jq '.volumes | length'; }
# Loop devices bound over a ublk device (blk-csi's read-only views).
ublk_loops() { grep -l ublkb /sys/block/loop*/loop/backing_file 2>/dev/null | wc -l; }

start_agent
start_csi --controller

step "identity, capabilities, node info"
expect_eq "plugin name" 1 "$(csi GetPluginInfo | grep -c '^name: "blk.csi.storage"')"
expect_eq "probe ready" 1 "$(csi Probe | grep -c 'value: true')"
caps="$(csi NodeGetCapabilities)"
for cap in STAGE_UNSTAGE_VOLUME GET_VOLUME_STATS VOLUME_CONDITION; do
  expect_eq "capability $cap" 1 "$(grep -c "type: $cap" <<<"$caps")"
done
expect_eq "node id" 1 "$(csi NodeGetInfo | grep -c '^node_id: "vm-node"')"
expect_eq "controller service" 1 "$(csi GetPluginCapabilities | grep -c 'type: CONTROLLER_SERVICE')"

step "controller: a file-pool class, a file per claim, staged by the node"
mkdir -p "$WORK/pool"
pool_class="file://$WORK/pool/{volume}.img"
create_request() { # name size-bytes [backend]
  echo "name: \"$1\" capacity_range { required_bytes: $2 }
  volume_capabilities $(capability ext4 | sed 's/^volume_capability //')
  parameters { key: \"backend\" value: \"${3:-$pool_class}\" }
  parameters { key: \"csi.storage.k8s.io/pvc/name\" value: \"data\" }
  accessibility_requirements { requisite { segments { key: \"blk.csi.storage/node\" value: \"vm-node\" } } }"
}
# The response's volume_context entries, as the CO passes them to the node.
context_of() { sed -n '/^  volume_context {/,/^  }/p' <<<"$1"; }
created="$(csi CreateVolume "$(create_request pvc-dyn $((32 << 20)))")" || fail "CreateVolume failed"
echo "$created"
expect_eq "the same answer again" "$created" "$(csi CreateVolume "$(create_request pvc-dyn $((32 << 20)))")"
expect_eq "size in the context" 1 "$(grep -c "value: \"$((32 << 20))\"" <<<"$created")"
expect_eq "topology" 1 "$(grep -c 'value: "vm-node"' <<<"$created")"
expect_eq "the claim's file, at its size" $((32 << 20)) "$(stat -c %s "$WORK/pool/pvc-dyn.img")"
expect_eq "agent volumes after CreateVolume" 0 "$(agent_volumes)"
other="$(csi CreateVolume "$(create_request pvc-dyn2 $((16 << 20)))")" || fail "CreateVolume failed"
expect_eq "the second claim's own file" $((16 << 20)) "$(stat -c %s "$WORK/pool/pvc-dyn2.img")"
for claim in pvc-dyn:"$created" pvc-dyn2:"$other"; do
  id="${claim%%:*}"
  csi_twice NodeStageVolume "volume_id: \"$id\" staging_target_path: \"$WORK/staging/$id\"
    $(capability ext4) $(context_of "${claim#*:}")"
  echo "$id" >"$WORK/staging/$id/data"
done
expect_eq "dynamic volume size" $((32 << 20)) "$(blockdev --getsize64 "$(volume_device pvc-dyn)")"
for id in pvc-dyn pvc-dyn2; do
  expect_eq "$id keeps its own data" "$id" "$(cat "$WORK/staging/$id/data")"
done
# A VolumeAttributesClass change: ControllerModifyVolume reaches the staged device at once, and a
# later stage with the context CreateVolume answered (which has no limit) keeps it.
read_iops_limit() { ctl get-volume "$1" -o json | jq -r '.volume.limits.readIops.rate // "none"'; }
csi ControllerModifyVolume 'volume_id: "pvc-dyn" mutable_parameters { key: "readIops" value: "300" }' ||
  fail "ControllerModifyVolume failed"
expect_eq "pvc-dyn's read IOPS limit after ControllerModifyVolume" 300 "$(read_iops_limit pvc-dyn)"
expect_eq "pvc-dyn2's untouched" none "$(read_iops_limit pvc-dyn2)"
run_fio modified-reads.json --name=r --filename="$(volume_device pvc-dyn)" --rw=randread --bs=4k \
  --iodepth=16 --direct=1 --ioengine=libaio --time_based --runtime=2 --output-format=json
iops="$(jq '.jobs[0].read.iops | floor' "$LOG_DIR/modified-reads.json")"
((iops > 0 && iops <= 330)) || fail "reads on pvc-dyn at $iops IOPS, over its modified limit of 300"
echo "ok: pvc-dyn reads at $iops IOPS under its modified limit of 300"
expect_fail_with INVALID_ARGUMENT "ControllerModifyVolume of what cannot change" \
  csi ControllerModifyVolume 'volume_id: "pvc-dyn" mutable_parameters { key: "queues" value: "4" }'
csi_twice NodeUnstageVolume "$(unstage_request pvc-dyn)"
csi_twice NodeStageVolume "volume_id: \"pvc-dyn\" staging_target_path: \"$WORK/staging/pvc-dyn\"
  $(capability ext4) $(context_of "$created")"
expect_eq "pvc-dyn's read IOPS limit after unstage and stage" 300 "$(read_iops_limit pvc-dyn)"
expect_eq "pvc-dyn's data after the restage" pvc-dyn "$(cat "$WORK/staging/pvc-dyn/data")"
expect_fail_with FAILED_PRECONDITION "DeleteVolume while staged" \
  csi DeleteVolume 'volume_id: "pvc-dyn"'
expect_fail_with ALREADY_EXISTS "CreateVolume of the same name, another size" \
  csi CreateVolume "$(create_request pvc-dyn $((64 << 20)))"
expect_fail_with INVALID_ARGUMENT "a class whose claims would share one file" \
  csi CreateVolume "$(create_request pvc-shared $((16 << 20)) "file://$WORK/pool/shared.img")"
expect_eq "nothing made for it" "" "$(ls "$WORK/pool/shared.img" "$WORK/csi-state/pvc-shared.json" 2>/dev/null)"
for id in pvc-dyn pvc-dyn2; do
  csi_twice NodeUnstageVolume "$(unstage_request $id)"
  csi_twice DeleteVolume "volume_id: \"$id\""
done
expect_eq "pool and records after DeleteVolume" "" "$(ls -A "$WORK/pool"; ls -A "$WORK/csi-state")"
expect_eq "agent volumes after the dynamic volumes" 0 "$(agent_volumes)"

step "required fields refused"
expect_fail_with INVALID_ARGUMENT "stage without volume_id" \
  csi NodeStageVolume "staging_target_path: \"$WORK/staging/x\" $(capability ext4) $(context null:// 16Mi)"
expect_fail_with INVALID_ARGUMENT "stage without staging_target_path" \
  csi NodeStageVolume "volume_id: \"x\" $(capability ext4) $(context null:// 16Mi)"
expect_fail_with INVALID_ARGUMENT "stage without volume_capability" \
  csi NodeStageVolume "volume_id: \"x\" staging_target_path: \"$WORK/staging/x\" $(context null:// 16Mi)"
expect_fail_with INVALID_ARGUMENT "stage without a backend" \
  csi NodeStageVolume "volume_id: \"x\" staging_target_path: \"$WORK/staging/x\" $(capability ext4)"
expect_fail_with INVALID_ARGUMENT "publish without target_path" \
  csi NodePublishVolume "volume_id: \"x\" staging_target_path: \"$WORK/staging/x\" $(capability ext4)"
expect_fail_with INVALID_ARGUMENT "unpublish without volume_id" \
  csi NodeUnpublishVolume "target_path: \"$WORK/pods/x\""
expect_fail_with INVALID_ARGUMENT "unstage without staging_target_path" \
  csi NodeUnstageVolume 'volume_id: "x"'
expect_fail_with INVALID_ARGUMENT "stats without volume_path" \
  csi NodeGetVolumeStats 'volume_id: "x"'
expect_eq "agent volumes after refusals" 0 "$(agent_volumes)"

step "a disk that holds a partition table is neither formatted nor mounted"
parted_image="$WORK/parted.img"
truncate -s 16M "$parted_image"
# A DOS (MBR) table: one Linux partition (type 0x83) at sector 2048, 28672 sectors long.
printf '\203' | dd of="$parted_image" bs=1 seek=450 conv=notrunc status=none
printf '\000\010\000\000\000\160\000\000' |
  dd of="$parted_image" bs=1 seek=454 conv=notrunc status=none
printf '\125\252' | dd of="$parted_image" bs=1 seek=510 conv=notrunc status=none
parted_before="$(sha256sum <"$parted_image")"
expect_fail_with "FAILED_PRECONDITION.*holds a dos partition table" "stage of a partitioned disk" \
  csi NodeStageVolume "$(stage_request parted ext4 "file://$parted_image" 16Mi)"
expect_eq "the partitioned disk unchanged" "$parted_before" "$(sha256sum <"$parted_image")"
mounted "$WORK/staging/parted" && fail "the partitioned disk is mounted"
expect_eq "agent volumes after the refused stage" 0 "$(agent_volumes)"

step "filesystem volume: stage (mkfs ext4 + mount), twice"
fs_image="$WORK/fs.img"
expect_fail_with "FAILED_PRECONDITION.*is missing" "stage of a volume whose file is missing" \
  csi NodeStageVolume "$(stage_request vfs ext4 "file://$fs_image" 64Mi)"
[[ ! -e "$fs_image" ]] || fail "the refused stage created $fs_image"
truncate -s 64M "$fs_image"
csi_twice NodeStageVolume "$(stage_request vfs ext4 "file://$fs_image" 64Mi)"
mounted "$WORK/staging/vfs" || fail "staging path not mounted"
fs_dev="$(volume_device vfs)"
expect_eq "file system on $fs_dev" ext4 "$(blkid -p -s TYPE -o value "$fs_dev")"
expect_fail_with ALREADY_EXISTS "restage with another size" \
  csi NodeStageVolume "$(stage_request vfs ext4 "file://$fs_image" 128Mi)"

step "publish at two targets (and a read-only third), twice each"
pod_a="$WORK/pods/a/mount" pod_b="$WORK/pods/b/mount" pod_ro="$WORK/pods/ro/mount"
csi_twice NodePublishVolume "$(publish_request vfs ext4 "$pod_a")"
csi_twice NodePublishVolume "$(publish_request vfs ext4 "$pod_b")"
csi_twice NodePublishVolume "$(publish_request vfs ext4 "$pod_ro" true)"
echo "written by pod a" >"$pod_a/data"
sync
expect_eq "pod b reads pod a's file" "written by pod a" "$(cat "$pod_b/data")"
expect_eq "read-only pod reads it too" "written by pod a" "$(cat "$pod_ro/data")"
expect_fail "writing through the read-only publish" touch "$pod_ro/nope"

step "stats: bytes and inodes, condition normal; NOT_FOUND for an unknown path"
stats="$(csi NodeGetVolumeStats "volume_id: \"vfs\" volume_path: \"$pod_a\"")"
echo "$stats"
expect_eq "byte usage" 1 "$(grep -c 'unit: BYTES' <<<"$stats")"
expect_eq "inode usage" 1 "$(grep -c 'unit: INODES' <<<"$stats")"
expect_eq "condition abnormal" 0 "$(grep -c 'abnormal: true' <<<"$stats")"
expect_fail_with NOT_FOUND "stats of an unknown path" \
  csi NodeGetVolumeStats "volume_id: \"vfs\" volume_path: \"$WORK/pods/none\""

step "unstage while published: FAILED_PRECONDITION, nothing touched"
expect_fail_with FAILED_PRECONDITION "unstage of a published volume" \
  csi NodeUnstageVolume "$(unstage_request vfs)"
mounted "$WORK/staging/vfs" || fail "the refused unstage unmounted the staging path"
expect_eq "agent volumes" 1 "$(agent_volumes)"

step "agent killed -9 and restarted under the published volume: nothing lost"
kill_agent
start_agent
wait_for "vfs live again" 60 bash -c \
  "blkctl --socket '$AGENT_SOCKET' get-volume vfs -o json | jq -e '.volume.status.state == \"VOLUME_STATE_LIVE\"' >/dev/null"
echo "appended after the restart" >>"$pod_b/data"
sync
expect_eq "pod a reads both lines" 2 "$(wc -l <"$pod_a/data")"

step "unpublish all, twice each: targets removed"
for target in "$pod_a" "$pod_b" "$pod_ro"; do
  csi_twice NodeUnpublishVolume "$(unpublish_request vfs "$target")"
  [[ ! -e "$target" ]] || fail "$target left behind"
done

step "unstage, twice: unmounted, agent volume deleted, image kept"
csi_twice NodeUnstageVolume "$(unstage_request vfs)"
mounted "$WORK/staging/vfs" && fail "staging path still mounted"
expect_eq "agent volumes" 0 "$(agent_volumes)"
[[ -s "$fs_image" ]] || fail "the image file is gone"

step "stage again: the data is still there (no reformat)"
csi_twice NodeStageVolume "$(stage_request vfs ext4 "file://$fs_image" 64Mi)"
expect_eq "first line after restage" "written by pod a" "$(head -n1 "$WORK/staging/vfs/data")"
expect_eq "second line after restage" "appended after the restart" "$(tail -n1 "$WORK/staging/vfs/data")"
csi_twice NodeUnstageVolume "$(unstage_request vfs)"

step "reader-only access mode: the device read-only, the file system mounted ro"
csi_twice NodeStageVolume "$(stage_request vfs ext4 "file://$fs_image" 64Mi SINGLE_NODE_READER_ONLY)"
expect_eq "ublk device read-only" 1 "$(blockdev --getro "$(volume_device vfs)")"
expect_eq "staging mount options" ro "$(findmnt -n -o OPTIONS "$WORK/staging/vfs" | cut -d, -f1)"
expect_eq "data readable" "written by pod a" "$(head -n1 "$WORK/staging/vfs/data")"
expect_fail "writing to a reader-only volume" touch "$WORK/staging/vfs/nope"
csi_twice NodeUnstageVolume "$(unstage_request vfs)"

step "raw block volume: stage, publish at two targets, twice each"
blk_image="$WORK/blk.img"
truncate -s 32M "$blk_image"
csi_twice NodeStageVolume "$(stage_request vblk block "file://$blk_image" 32Mi)"
mounted "$WORK/staging/vblk" && fail "block mode mounted something at the staging path"
dev_d="$WORK/pods/d/volumeDevices/vblk" dev_e="$WORK/pods/e/volumeDevices/vblk"
csi_twice NodePublishVolume "$(publish_request vblk block "$dev_d")"
csi_twice NodePublishVolume "$(publish_request vblk block "$dev_e")"
[[ -b "$dev_d" && -b "$dev_e" ]] || fail "the targets are not block device nodes"
head -c 4M /dev/urandom >"$WORK/pattern"
dd if="$WORK/pattern" of="$dev_d" bs=1M oflag=direct conv=fsync status=none
dd if="$dev_e" bs=1M count=4 iflag=direct status=none | cmp - "$WORK/pattern" ||
  fail "target e does not read what target d wrote"
echo "ok: written through one target, read back through the other"
stats="$(csi NodeGetVolumeStats "volume_id: \"vblk\" volume_path: \"$dev_d\"")"
expect_eq "block size in stats" 1 "$(grep -c "total: $((32 << 20))" <<<"$stats")"
expect_fail_with FAILED_PRECONDITION "unstage of a published block volume" \
  csi NodeUnstageVolume "$(unstage_request vblk)"

step "raw block readonly publish: the kernel refuses the pod's writes, the rw publish still writes"
dev_ro="$WORK/pods/ro/volumeDevices/vblk"
csi_twice NodePublishVolume "$(publish_request vblk block "$dev_ro" true)"
expect_eq "loop devices over the ublk device" 1 "$(ublk_loops)"
ro_loop="$(grep -l ublkb /sys/block/loop*/loop/backing_file | cut -d/ -f4)"
expect_eq "$ro_loop read-only" 1 "$(cat "/sys/block/$ro_loop/ro")"
expect_eq "$ro_loop direct I/O" 1 "$(cat "/sys/block/$ro_loop/loop/dio")"
dd if="$dev_ro" bs=1M count=4 iflag=direct status=none | cmp - "$WORK/pattern" ||
  fail "the read-only target does not read the data"
expect_fail_with "Operation not permitted|Read-only file system" "writing through the readonly publish" \
  dd if=/dev/zero of="$dev_ro" bs=4k count=1 oflag=direct status=none
dd if=/dev/zero of="$dev_d" bs=4k count=1 oflag=direct conv=fsync status=none ||
  fail "the read-write publish no longer writes"
dd if="$dev_ro" bs=4k count=1 iflag=direct status=none | cmp -s - <(head -c 4096 /dev/zero) ||
  fail "the read-only target does not see the read-write publish's write"
dd if="$WORK/pattern" of="$dev_d" bs=1M oflag=direct conv=fsync status=none
expect_fail_with FAILED_PRECONDITION "unstage while published read-only" \
  csi NodeUnstageVolume "$(unstage_request vblk)"
csi_twice NodeUnpublishVolume "$(unpublish_request vblk "$dev_ro")"
[[ ! -e "$dev_ro" ]] || fail "$dev_ro left behind"
expect_eq "loop devices after the unpublish" 0 "$(ublk_loops)"

step "raw block: unpublish, unstage, stage again: data still there"
for target in "$dev_d" "$dev_e"; do
  csi_twice NodeUnpublishVolume "$(unpublish_request vblk "$target")"
  [[ ! -e "$target" ]] || fail "$target left behind"
done
# A loop device no mount uses any more, as blk-csi stopped between unmounting and detaching
# leaves it (or between attaching and bind-mounting): the unstage detaches it.
csi NodePublishVolume "$(publish_request vblk block "$dev_ro" true)" >/dev/null
umount "$dev_ro"
csi NodeUnpublishVolume "$(unpublish_request vblk "$dev_ro")" >/dev/null
expect_eq "an unmounted loop device left over" 1 "$(ublk_loops)"
csi_twice NodeUnstageVolume "$(unstage_request vblk)"
expect_eq "loop devices after the unstage" 0 "$(ublk_loops)"
expect_eq "agent volumes" 0 "$(agent_volumes)"
csi_twice NodeStageVolume "$(stage_request vblk block "file://$blk_image" 32Mi)"
csi_twice NodePublishVolume "$(publish_request vblk block "$dev_d")"
dd if="$dev_d" bs=1M count=4 iflag=direct status=none | cmp - "$WORK/pattern" ||
  fail "the data did not survive unstage + stage"
echo "ok: the block data survived unstage + stage"
csi_twice NodeUnpublishVolume "$(unpublish_request vblk "$dev_d")"
csi_twice NodeUnstageVolume "$(unstage_request vblk)"

step "done: nothing left"
expect_eq "agent volumes" 0 "$(agent_volumes)"
stop_csi
[[ ! -e "$CSI_SOCKET" ]] || fail "blk-csi left its socket behind"
stop_agent
