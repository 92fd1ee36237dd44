#!/usr/bin/env bash
# A csi-sanity-like suite of our own, on the real blk-csi, the real agent and
# real mkfs/mount: what kubernetes-csi's csi-sanity checks of the Identity and
# Node services, and of the Controller's CreateVolume, DeleteVolume,
# ValidateVolumeCapabilities and ControllerModifyVolume (a file pool: a file per
# volume, the same answer again, ALREADY_EXISTS for the same name with another
# capacity, a class whose claims would share one backing refused, validation by
# the volume id alone, modify's bad requests and unknown volume refused, deletes
# idempotent and the file gone). Every required field refused with INVALID_ARGUMENT; every
# call idempotent (stage, publish, unpublish, unstage twice; unstage and
# unpublish of what is not there); plugin info, capabilities (exactly what is
# served), probe, node info; NodeGetVolumeStats and NodeExpandVolume NOT_FOUND
# for an unknown volume or path (or one the volume is not published at); staging and target
# paths outside the kubelet root, with '..' or through a symbolic link refused; a filesystem and a raw block volume through
# their whole life (read-only publishes included); the reader-only access
# modes. All checks run on one channel by one blk_csi_client (--checks): one
# line per check, PASS or FAIL.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/csi_lib.sh"
one_kernel_only lts "blk-csi's answers do not depend on the kernel"

S="$WORK/sanity"
mkdir -p "$S"
# The backing files of the volumes staged: blk-csi never creates one (a reboot's unmounted pool).
truncate -s 16M "$S"/{vfs,vblk,vro,vempty}.img
CHECKS="$WORK/checks"
: >"$CHECKS"
check() { # NAME METHOD CODE [REQUEST [=RESPONSE|~TEXT]]
  local line="$1 | $2 | $3 | ${4:-}"
  [[ $# -lt 5 ]] || line+=" | $5"
  echo "$line" >>"$CHECKS"
}

ctx() { echo "volume_context { key: \"backend\" value: \"file://$S/$1.img\" } volume_context { key: \"size\" value: \"$2\" }"; }
stage() { echo "volume_id: \"$1\" staging_target_path: \"$S/staging/$1\" $(capability "$2" "${3:-}") $(ctx "$1" 16Mi)"; }
unstage() { echo "volume_id: \"$1\" staging_target_path: \"$S/staging/$1\""; }
publish() { # id kind target readonly [access mode]
  echo "volume_id: \"$1\" staging_target_path: \"$S/staging/$1\" target_path: \"$3\" $(capability "$2" "${5:-}") readonly: $4"
}
unpublish() { echo "volume_id: \"$1\" target_path: \"$2\""; }

# --- Identity
check "GetPluginInfo: name" GetPluginInfo OK "" '~name: "blk.csi.storage"'
check "GetPluginInfo: vendor_version" GetPluginInfo OK "" '~vendor_version: "'
check "GetPluginCapabilities: the controller" GetPluginCapabilities OK "" \
  "=capabilities { service { type: CONTROLLER_SERVICE } } capabilities { service { type: VOLUME_ACCESSIBILITY_CONSTRAINTS } }"
check "Probe: ready" Probe OK "" "=ready { value: true }"

# --- Controller: CreateVolume, ValidateVolumeCapabilities, DeleteVolume (file pool $S/pool)
mkdir -p "$S/pool"
class="parameters { key: \"backend\" value: \"file://$S/pool/{volume}.img\" }"
caps="volume_capabilities { mount { fs_type: \"ext4\" } access_mode { mode: SINGLE_NODE_WRITER } }"
create() { # name bytes [class]
  echo "name: \"$1\" capacity_range { required_bytes: $2 } $caps ${3:-$class}"
}
check "ControllerGetCapabilities" ControllerGetCapabilities OK "" \
  "=capabilities { rpc { type: CREATE_DELETE_VOLUME } } capabilities { rpc { type: MODIFY_VOLUME } }"
check "CreateVolume: no name" CreateVolume INVALID_ARGUMENT "capacity_range { required_bytes: 1048576 } $caps $class"
check "CreateVolume: no capabilities" CreateVolume INVALID_ARGUMENT "name: \"c0\" $class"
check "CreateVolume: multi-node writer" CreateVolume INVALID_ARGUMENT \
  "name: \"c0\" volume_capabilities { block { } access_mode { mode: MULTI_NODE_MULTI_WRITER } } $class"
check "CreateVolume: a class whose claims share one backing" CreateVolume INVALID_ARGUMENT \
  "$(create c0 1048576 "parameters { key: \"backend\" value: \"file://$S/pool/one.img\" }")"
check "CreateVolume: another node's topology" CreateVolume RESOURCE_EXHAUSTED \
  "$(create c0 1048576) accessibility_requirements { requisite { segments { key: \"blk.csi.storage/node\" value: \"node-2\" } } }"
for i in 1 2; do
  check "CreateVolume #$i: the same answer" CreateVolume OK "$(create c1 $((16 << 20)))" \
    "=volume { capacity_bytes: $((16 << 20)) volume_id: \"c1\" volume_context { key: \"backend\" value: \"file://$S/pool/c1.img\" } volume_context { key: \"size\" value: \"$((16 << 20))\" } accessible_topology { segments { key: \"blk.csi.storage/node\" value: \"vm-node\" } } }"
done
check "CreateVolume: the same name, another capacity" CreateVolume ALREADY_EXISTS "$(create c1 $((32 << 20)))"
check "ValidateVolumeCapabilities: by the id alone" ValidateVolumeCapabilities OK "volume_id: \"c1\" $caps" \
  "~confirmed {"
check "ValidateVolumeCapabilities: an unknown volume" ValidateVolumeCapabilities NOT_FOUND "volume_id: \"c9\" $caps"
check "ValidateVolumeCapabilities: no capabilities" ValidateVolumeCapabilities INVALID_ARGUMENT "volume_id: \"c1\""
mutable() { echo "mutable_parameters { key: \"$1\" value: \"$2\" }"; }
check "ControllerModifyVolume: no volume_id" ControllerModifyVolume INVALID_ARGUMENT "$(mutable iops 100)"
check "ControllerModifyVolume: no mutable_parameters" ControllerModifyVolume INVALID_ARGUMENT 'volume_id: "c1"'
check "ControllerModifyVolume: a parameter that cannot change" ControllerModifyVolume INVALID_ARGUMENT \
  "volume_id: \"c1\" $(mutable backend null://)"
check "ControllerModifyVolume: a bad limit" ControllerModifyVolume INVALID_ARGUMENT "volume_id: \"c1\" $(mutable iops -1)"
check "ControllerModifyVolume: an unknown volume" ControllerModifyVolume NOT_FOUND "volume_id: \"c9\" $(mutable iops 100)"
for i in 1 2; do
  check "ControllerModifyVolume #$i" ControllerModifyVolume OK "volume_id: \"c1\" $(mutable iops 100)" "="
done
check "DeleteVolume: no volume_id" DeleteVolume INVALID_ARGUMENT "volume_id: \"\""
for i in 1 2; do check "DeleteVolume #$i" DeleteVolume OK "volume_id: \"c1\""; done
check "DeleteVolume: an unknown volume" DeleteVolume OK "volume_id: \"c9\""

# --- NodeGetCapabilities / NodeGetInfo
check "NodeGetCapabilities: exactly what is served" NodeGetCapabilities OK "" \
  "=capabilities { rpc { type: STAGE_UNSTAGE_VOLUME } } capabilities { rpc { type: GET_VOLUME_STATS } } capabilities { rpc { type: EXPAND_VOLUME } } capabilities { rpc { type: VOLUME_CONDITION } }"
check "NodeGetInfo: node id and topology" NodeGetInfo OK "" \
  '=node_id: "vm-node" accessible_topology { segments { key: "blk.csi.storage/node" value: "vm-node" } }'

# --- Required fields and bad values: INVALID_ARGUMENT, nothing created
st="staging_target_path: \"$S/staging/x\""
check "stage: no volume_id" NodeStageVolume INVALID_ARGUMENT "$st $(capability ext4) $(ctx x 16Mi)"
check "stage: no staging_target_path" NodeStageVolume INVALID_ARGUMENT "volume_id: \"x\" $(capability ext4) $(ctx x 16Mi)"
check "stage: relative staging_target_path" NodeStageVolume INVALID_ARGUMENT "volume_id: \"x\" staging_target_path: \"staging/x\" $(capability ext4) $(ctx x 16Mi)"
check "stage: no volume_capability" NodeStageVolume INVALID_ARGUMENT "volume_id: \"x\" $st $(ctx x 16Mi)"
check "stage: capability without access type" NodeStageVolume INVALID_ARGUMENT "volume_id: \"x\" $st volume_capability { access_mode { mode: SINGLE_NODE_WRITER } } $(ctx x 16Mi)"
check "stage: multi-node writer" NodeStageVolume INVALID_ARGUMENT "volume_id: \"x\" $st $(capability block MULTI_NODE_MULTI_WRITER) $(ctx x 16Mi)"
check "stage: unsupported fs_type" NodeStageVolume INVALID_ARGUMENT "volume_id: \"x\" $st $(capability btrfs) $(ctx x 16Mi)"
check "stage: no backend in the context" NodeStageVolume INVALID_ARGUMENT "volume_id: \"x\" $st $(capability ext4)"
check "stage: the backing file is missing" NodeStageVolume FAILED_PRECONDITION "$(stage vmissing ext4)"
check "the refused stage left no agent volume" NodeGetVolumeStats NOT_FOUND "volume_id: \"vmissing\" volume_path: \"$S\""
check "unstage: no volume_id" NodeUnstageVolume INVALID_ARGUMENT "$st"
check "unstage: no staging_target_path" NodeUnstageVolume INVALID_ARGUMENT 'volume_id: "x"'
tp="target_path: \"$S/pods/x\""
check "publish: no volume_id" NodePublishVolume INVALID_ARGUMENT "$st $tp $(capability ext4)"
check "publish: no staging_target_path" NodePublishVolume INVALID_ARGUMENT "volume_id: \"x\" $tp $(capability ext4)"
check "publish: no target_path" NodePublishVolume INVALID_ARGUMENT "volume_id: \"x\" $st $(capability ext4)"
check "publish: no volume_capability" NodePublishVolume INVALID_ARGUMENT "volume_id: \"x\" $st $tp"
check "unpublish: no volume_id" NodeUnpublishVolume INVALID_ARGUMENT "$tp"
check "unpublish: no target_path" NodeUnpublishVolume INVALID_ARGUMENT 'volume_id: "x"'
check "stats: no volume_id" NodeGetVolumeStats INVALID_ARGUMENT "volume_path: \"$S\""
check "stats: no volume_path" NodeGetVolumeStats INVALID_ARGUMENT 'volume_id: "x"'
check "expand: no volume_id" NodeExpandVolume INVALID_ARGUMENT "volume_path: \"$S\""
check "expand: no volume_path" NodeExpandVolume INVALID_ARGUMENT 'volume_id: "x"'
check "expand: negative required_bytes" NodeExpandVolume INVALID_ARGUMENT "volume_id: \"x\" volume_path: \"$S\" capacity_range { required_bytes: -1 }"

# --- What is not there
check "stats: unknown volume" NodeGetVolumeStats NOT_FOUND "volume_id: \"unknown\" volume_path: \"$S\""
check "stats: unknown path" NodeGetVolumeStats NOT_FOUND "volume_id: \"unknown\" volume_path: \"$S/none\""
check "expand: unknown volume" NodeExpandVolume NOT_FOUND "volume_id: \"unknown\" volume_path: \"$S\""
# csi-sanity's own paths are relative: the volume is looked up first, so NOT_FOUND all the same.
check "stats: unknown volume, relative path" NodeGetVolumeStats NOT_FOUND 'volume_id: "unknown" volume_path: "some/path"'
check "expand: unknown volume, relative path" NodeExpandVolume NOT_FOUND 'volume_id: "unknown" volume_path: "some/path"'
check "publish: volume not staged" NodePublishVolume NOT_FOUND "$(publish unknown ext4 "$S/pods/x" false)"
check "unpublish: nothing published there" NodeUnpublishVolume OK "$(unpublish unknown "$S/pods/x")"
check "unstage: unknown volume" NodeUnstageVolume OK "$(unstage unknown)"

# --- A filesystem volume through its life, every call twice
for i in 1 2; do check "stage fs #$i (mkfs ext4 + mount)" NodeStageVolume OK "$(stage vfs ext4)"; done
check "stage fs again with another size" NodeStageVolume ALREADY_EXISTS \
  "volume_id: \"vfs\" staging_target_path: \"$S/staging/vfs\" $(capability ext4) $(ctx vfs 32Mi)"
for i in 1 2; do
  check "publish fs #$i" NodePublishVolume OK "$(publish vfs ext4 "$S/pods/a" false)"
  check "publish fs read-only #$i" NodePublishVolume OK "$(publish vfs ext4 "$S/pods/ro" true)"
done
check "stats fs: bytes and inodes" NodeGetVolumeStats OK "volume_id: \"vfs\" volume_path: \"$S/pods/a\"" "~unit: INODES"
check "stats fs: condition normal" NodeGetVolumeStats OK "volume_id: \"vfs\" volume_path: \"$S/pods/a\"" '~volume_condition { message: "live" }'
for i in 1 2; do
  check "expand fs to its size #$i" NodeExpandVolume OK \
    "volume_id: \"vfs\" volume_path: \"$S/pods/a\" capacity_range { required_bytes: $((16 << 20)) }" \
    "=capacity_bytes: $((16 << 20))"
done
# Paths the kubelet would never send: outside its root (blk-csi runs with --kubelet-root $WORK),
# with '..', or through a symbolic link ($S/pods/link points outside): refused, nothing made.
check "publish fs: target outside the kubelet root" NodePublishVolume INVALID_ARGUMENT \
  "$(publish vfs ext4 /var/tmp/blk-escape false)"
check "publish fs: target with '..'" NodePublishVolume INVALID_ARGUMENT \
  "$(publish vfs ext4 "$S/pods/../../../var/tmp/blk-escape" false)"
check "publish fs: target through a symbolic link" NodePublishVolume FAILED_PRECONDITION \
  "$(publish vfs ext4 "$S/pods/link/a" false)"
check "publish block: target through a symbolic link" NodePublishVolume FAILED_PRECONDITION \
  "$(publish vfs block "$S/pods/link/file" false)"
check "stage: staging path outside the kubelet root" NodeStageVolume INVALID_ARGUMENT \
  "volume_id: \"vout\" staging_target_path: \"/var/tmp/blk-escape\" $(capability ext4) $(ctx vout 16Mi)"
check "expand fs: unknown path" NodeExpandVolume NOT_FOUND "volume_id: \"vfs\" volume_path: \"$S/pods/none\""
# A path that exists, but where this volume is not published.
check "stats fs: a path it is not published at" NodeGetVolumeStats NOT_FOUND "volume_id: \"vfs\" volume_path: \"$S\""
check "expand fs: a path it is not published at" NodeExpandVolume NOT_FOUND \
  "volume_id: \"vfs\" volume_path: \"$S\" capacity_range { required_bytes: $((32 << 20)) }"
check "expand fs: still 16 MiB after the refused expand" NodeExpandVolume OK \
  "volume_id: \"vfs\" volume_path: \"$S/pods/a\" capacity_range { required_bytes: $((16 << 20)) }" \
  "=capacity_bytes: $((16 << 20))"
check "unstage fs while published" NodeUnstageVolume FAILED_PRECONDITION "$(unstage vfs)"
for i in 1 2; do
  check "unpublish fs #$i" NodeUnpublishVolume OK "$(unpublish vfs "$S/pods/a")"
  check "unpublish fs read-only #$i" NodeUnpublishVolume OK "$(unpublish vfs "$S/pods/ro")"
done
for i in 1 2; do check "unstage fs #$i" NodeUnstageVolume OK "$(unstage vfs)"; done
check "stats fs after unstage: gone" NodeGetVolumeStats NOT_FOUND "volume_id: \"vfs\" volume_path: \"$S\""

# --- A raw block volume through its life, every call twice
for i in 1 2; do check "stage block #$i" NodeStageVolume OK "$(stage vblk block)"; done
for i in 1 2; do
  check "publish block #$i" NodePublishVolume OK "$(publish vblk block "$S/pods/d/vblk" false)"
  check "publish block read-only #$i" NodePublishVolume OK "$(publish vblk block "$S/pods/e/vblk" true)"
done
check "stats block: its size" NodeGetVolumeStats OK "volume_id: \"vblk\" volume_path: \"$S/pods/d/vblk\"" "~total: $((16 << 20))"
check "unstage block while published read-only" NodeUnstageVolume FAILED_PRECONDITION "$(unstage vblk)"
for i in 1 2; do
  check "unpublish block #$i" NodeUnpublishVolume OK "$(unpublish vblk "$S/pods/d/vblk")"
  check "unpublish block read-only #$i" NodeUnpublishVolume OK "$(unpublish vblk "$S/pods/e/vblk")"
done
for i in 1 2; do check "unstage block #$i" NodeUnstageVolume OK "$(unstage vblk)"; done

# --- Reader-only access modes
check "stage reader-only fs of an empty volume: cannot format" NodeStageVolume FAILED_PRECONDITION \
  "$(stage vempty ext4 SINGLE_NODE_READER_ONLY)"
check "the refused stage left no agent volume" NodeGetVolumeStats NOT_FOUND "volume_id: \"vempty\" volume_path: \"$S\""
for i in 1 2; do
  check "stage reader-only block #$i" NodeStageVolume OK "$(stage vro block MULTI_NODE_READER_ONLY)"
done
check "stage it again read-write" NodeStageVolume ALREADY_EXISTS "$(stage vro block)"
for i in 1 2; do
  check "publish reader-only block #$i" NodePublishVolume OK \
    "$(publish vro block "$S/pods/f/vro" true MULTI_NODE_READER_ONLY)"
done
for i in 1 2; do check "unpublish reader-only block #$i" NodeUnpublishVolume OK "$(unpublish vro "$S/pods/f/vro")"; done
for i in 1 2; do check "unstage reader-only block #$i" NodeUnstageVolume OK "$(unstage vro)"; done

start_agent
start_csi --controller

outside="$WORK/outside"
mkdir -p "$outside" "$S/pods"
ln -s "$outside" "$S/pods/link"

step "$(grep -c . "$CHECKS") checks on one channel"
csi --checks "$CHECKS" || fail "sanity checks failed (FAIL lines above)"

step "nothing left behind"
expect_eq "pool files and controller records" "" "$(ls -A "$S/pool"; ls -A "$WORK/csi-state")"
expect_eq "entries made through the symbolic link" "" "$(ls -A "$outside")"
[[ ! -e /var/tmp/blk-escape ]] || fail "a path outside the kubelet root was created"
expect_eq "mounts under $S" 0 "$(findmnt -rn -o TARGET | grep -c "^$S/")"
expect_eq "agent volumes" 0 "$(ctl list-volumes -o json | jq '.volumes | length')"
expect_eq "loop devices over ublk devices" 0 \
  "$(grep -l ublkb /sys/block/loop*/loop/backing_file 2>/dev/null | wc -l)"
for target in "$S/pods/a" "$S/pods/ro" "$S/pods/d/vblk" "$S/pods/e/vblk" "$S/pods/f/vro"; do
  [[ ! -e "$target" ]] || fail "unpublish left $target behind"
done
stop_csi
stop_agent
