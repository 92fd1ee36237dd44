#!/usr/bin/env bash
# An NBD StorageClass (backend nbd://127.0.0.1:PORT/{volume}) against a real peer: nbdkit's file
# plugin with dir=, one export per file there. Two claims made through the Controller
# (CreateVolume) each get their own export name; staged and published through the Node service,
# one as ext4 and one as a raw block device, each written with its own marker; afterwards each
# export file on the server holds its own volume's data and not the other's (the ext4 one a file
# system, the raw one the bytes written at offset 0). A claim whose export the server does not
# have is refused at the stage, nothing left. Unpublish, unstage, DeleteVolume: no agent volume,
# ublk device, NBD connection, mount or controller record left; the export files stay (the data
# is the server's). A class without {volume} is refused in 65 (file) and the unit tests (nbd).
# A re-stage while the server fails every read (nbdkit's error filter; blkid then finds "nothing")
# is refused with the reason, and the file system is not formatted over: it mounts intact once
# the reads work again.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/csi_lib.sh"
one_kernel_only newest "blk-csi's per-volume backends do not depend on the kernel"

PORT=10839
EXPORTS="$WORK/exports"
FAIL_READS="$WORK/fail-reads" # while it exists, nbdkit fails every read with EIO
class="nbd://127.0.0.1:$PORT/{volume}"

tcp_open() { (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; }
nbd_connections() { ss -Htn state established "( sport = :$PORT )" | wc -l; }
no_nbd_connections() { (($(nbd_connections) == 0)); }
agent_volumes() { ctl list-volumes -o json | jq '.volumes | length'; }
ublk_devices() { compgen -G '/dev/ublk[bc]*' | wc -l; }
has() { grep -qaF -- "$2" "$1"; } # FILE TEXT
# Check lines (NAME | METHOD | CODE | REQUEST) on stdin, one process for them all (a process start
# costs more than a call under TCG).
csi_calls() { csi --checks - || fail "CSI calls failed (FAIL lines above)"; }
# The response's volume_context entries, as the CO passes them to the node.
context_of() { sed -n '/^  volume_context {/,/^  }/p' <<<"$1"; }

create_request() { # name kind
  echo "name: \"$1\" capacity_range { required_bytes: $((32 << 20)) }
  volume_capabilities $(capability "$2" | sed 's/^volume_capability //')
  parameters { key: \"backend\" value: \"$class\" }
  accessibility_requirements { requisite { segments { key: \"blk.csi.storage/node\" value: \"vm-node\" } } }"
}
stage_request() { # id kind created: on one line, for a check line
  echo "volume_id: \"$1\" staging_target_path: \"$WORK/staging/$1\" $(capability "$2")" \
    "$(context_of "$3" | tr '\n' ' ')"
}
publish_request() { # id kind target
  echo "volume_id: \"$1\" staging_target_path: \"$WORK/staging/$1\" target_path: \"$3\" $(capability "$2")"
}

command -v nbdkit >/dev/null || fail "nbdkit not found in the guest"
# CreateVolume makes no NBD export (the controller cannot reach the server's storage; the example
# class says so): the server's admin makes one file per claim in the export directory, named
# after the volume id (a claim name that is a DNS label, as Kubernetes' pvc-<uid>, is its id).
mkdir -p "$EXPORTS"
truncate -s 32M "$EXPORTS/pvc-nbd-fs" "$EXPORTS/pvc-nbd-raw"
nbdkit -f -i 127.0.0.1 -p "$PORT" --filter=error file dir="$EXPORTS" \
  error-pread=EIO error-pread-rate=100% error-pread-file="$FAIL_READS" >>"$LOG_DIR/nbdkit.log" 2>&1 &
nbdkit_pid=$!
on_exit kill -KILL "$nbdkit_pid"
wait_for "nbdkit on 127.0.0.1:$PORT" 30 tcp_open

start_agent
start_csi --controller

step "CreateVolume: two claims of one nbd class, an export name each"
fs_created="$(csi CreateVolume "$(create_request pvc-nbd-fs ext4)")" || fail "CreateVolume pvc-nbd-fs failed"
raw_created="$(csi CreateVolume "$(create_request pvc-nbd-raw block)")" || fail "CreateVolume pvc-nbd-raw failed"
echo "$fs_created"
expect_eq "pvc-nbd-fs's backend" 1 "$(grep -cF "value: \"nbd://127.0.0.1:$PORT/pvc-nbd-fs\"" <<<"$fs_created")"
expect_eq "pvc-nbd-raw's backend" 1 "$(grep -cF "value: \"nbd://127.0.0.1:$PORT/pvc-nbd-raw\"" <<<"$raw_created")"
expect_eq "agent volumes after CreateVolume" 0 "$(agent_volumes)"

step "stage and publish: pvc-nbd-fs as ext4, pvc-nbd-raw as a raw block device"
pod_fs="$WORK/pods/fs/mount" pod_raw="$WORK/pods/raw/volumeDevices/pvc-nbd-raw"
csi_calls <<EOF
stage pvc-nbd-fs | NodeStageVolume | OK | $(stage_request pvc-nbd-fs ext4 "$fs_created")
stage pvc-nbd-raw | NodeStageVolume | OK | $(stage_request pvc-nbd-raw block "$raw_created")
publish pvc-nbd-fs | NodePublishVolume | OK | $(publish_request pvc-nbd-fs ext4 "$pod_fs")
publish pvc-nbd-raw | NodePublishVolume | OK | $(publish_request pvc-nbd-raw block "$pod_raw")
EOF

# At least one a volume: the count that must drop to 0 at the end counts them.
(($(nbd_connections) >= 2)) || fail "nbdkit has $(nbd_connections) connections, want one a volume at least"

step "each volume written with its own marker"
# Random markers: nothing else (a file system's metadata names its mount point) can hold them.
marker_fs="blk-69-fs-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
marker_raw="blk-69-raw-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
echo "$marker_fs" >"$pod_fs/data"
head -c 4M /dev/urandom >"$WORK/raw-pattern"
echo "$marker_raw" | dd of="$WORK/raw-pattern" conv=notrunc status=none
dd if="$WORK/raw-pattern" of="$pod_raw" bs=1M oflag=direct conv=fsync status=none ||
  fail "writing pvc-nbd-raw failed"
expect_eq "pvc-nbd-fs reads its file" "$marker_fs" "$(cat "$pod_fs/data")"

step "a re-stage while every read fails: refused with the reason, nothing formatted over"
csi_calls <<EOF
unpublish pvc-nbd-fs | NodeUnpublishVolume | OK | volume_id: "pvc-nbd-fs" target_path: "$pod_fs"
unstage pvc-nbd-fs | NodeUnstageVolume | OK | volume_id: "pvc-nbd-fs" staging_target_path: "$WORK/staging/pvc-nbd-fs"
EOF
touch "$FAIL_READS"
expect_fail "stage of pvc-nbd-fs while its server fails reads" \
  csi NodeStageVolume "$(stage_request pvc-nbd-fs ext4 "$fs_created")"
grep -q "cannot read /dev/ublkb" <<<"$EXPECT_OUTPUT" || fail "the refusal does not say the device cannot be read: $EXPECT_OUTPUT"
rm "$FAIL_READS"
csi_calls <<EOF
stage pvc-nbd-fs again | NodeStageVolume | OK | $(stage_request pvc-nbd-fs ext4 "$fs_created")
publish pvc-nbd-fs again | NodePublishVolume | OK | $(publish_request pvc-nbd-fs ext4 "$pod_fs")
EOF
expect_eq "pvc-nbd-fs's file after the refused stage" "$marker_fs" "$(cat "$pod_fs/data")"

step "a claim whose export the server does not have: refused at the stage, nothing left"
missing_created="$(csi CreateVolume "$(create_request pvc-nbd-missing block)")" ||
  fail "CreateVolume pvc-nbd-missing failed"
expect_fail "stage of a volume without an export" \
  csi NodeStageVolume "$(stage_request pvc-nbd-missing block "$missing_created")"
grep -qi "export" <<<"$EXPECT_OUTPUT" || fail "the refusal does not name the export: $EXPECT_OUTPUT"
expect_eq "agent volumes after the refused stage" 2 "$(agent_volumes)"
csi DeleteVolume 'volume_id: "pvc-nbd-missing"' >/dev/null || fail "DeleteVolume pvc-nbd-missing failed"
[[ ! -e "$EXPORTS/pvc-nbd-missing" ]] || fail "an export file was made for pvc-nbd-missing"

step "unpublish, unstage, DeleteVolume"
csi_calls <<EOF
unpublish pvc-nbd-fs | NodeUnpublishVolume | OK | volume_id: "pvc-nbd-fs" target_path: "$pod_fs"
unpublish pvc-nbd-raw | NodeUnpublishVolume | OK | volume_id: "pvc-nbd-raw" target_path: "$pod_raw"
unstage pvc-nbd-fs | NodeUnstageVolume | OK | volume_id: "pvc-nbd-fs" staging_target_path: "$WORK/staging/pvc-nbd-fs"
unstage pvc-nbd-raw | NodeUnstageVolume | OK | volume_id: "pvc-nbd-raw" staging_target_path: "$WORK/staging/pvc-nbd-raw"
DeleteVolume pvc-nbd-fs | DeleteVolume | OK | volume_id: "pvc-nbd-fs"
DeleteVolume pvc-nbd-raw | DeleteVolume | OK | volume_id: "pvc-nbd-raw"
EOF

step "on the server: each export file holds its own volume's data only"
fs_export="$EXPORTS/pvc-nbd-fs" raw_export="$EXPORTS/pvc-nbd-raw"
expect_eq "pvc-nbd-fs's export" ext4 "$(blkid -p -s TYPE -o value "$fs_export")"
has "$fs_export" "$marker_fs" || fail "pvc-nbd-fs's file is not in its export"
cmp -n $((4 << 20)) "$raw_export" "$WORK/raw-pattern" || fail "pvc-nbd-raw's export does not start with its data"
! has "$fs_export" "$marker_raw" || fail "pvc-nbd-raw's data is in pvc-nbd-fs's export"
! has "$raw_export" "$marker_fs" || fail "pvc-nbd-fs's data is in pvc-nbd-raw's export"
echo "ok: each marker in its own export only"
for export in "$fs_export" "$raw_export"; do
  expect_eq "$(basename "$export") kept, at its size" $((32 << 20)) "$(stat -c %s "$export")"
done

step "nothing left"
expect_eq "agent volumes" 0 "$(agent_volumes)"
expect_eq "ublk devices" 0 "$(ublk_devices)"
wait_for "the agent's NBD connections closed" 10 no_nbd_connections
expect_eq "mounts under $WORK" 0 "$(findmnt -rn -o TARGET | grep -c "^$WORK/")"
expect_eq "controller records" "" "$(ls -A "$WORK/csi-state")"
exports=("$EXPORTS"/*)
expect_eq "export files" "$fs_export $raw_export" "${exports[*]}"
stop_csi
stop_agent
