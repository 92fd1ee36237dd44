# The blk-csi helpers scenarios 65, 67, 68 and 69 share; sourced after lib.sh.

CSI_SOCKET="$WORK/csi/csi.sock"
CSI_PID=""

stop_csi() {
  [[ -n "$CSI_PID" ]] || return 0
  kill -TERM "$CSI_PID"
  wait_gone "$CSI_PID" 20 || fail "blk-csi did not exit within 20s of SIGTERM"
  wait "$CSI_PID" || fail "blk-csi exited with status $? after SIGTERM"
  CSI_PID=""
}

# blk-csi on $CSI_SOCKET for the agent started before (extra flags: e.g. --controller), stopped
# and its mounts undone on exit.
start_csi() {
  mkdir -p "$(dirname "$CSI_SOCKET")"
  blk-csi --endpoint "unix://$CSI_SOCKET" --agent-socket "$AGENT_SOCKET" --node-id vm-node \
    --kubelet-root "$WORK" --state-dir "$WORK/csi-state" "$@" >>"$LOG_DIR/blk-csi.log" 2>&1 &
  CSI_PID=$!
  on_exit stop_csi
  on_exit unmount_all
  wait_for "blk-csi on $CSI_SOCKET" 30 unix_listening "$CSI_SOCKET"
}

csi() { blk_csi_client "unix://$CSI_SOCKET" "$@"; }

# A VolumeCapability in text format: block or a file system, and an access mode.
capability() { # block|ext4 [access mode]
  local mode="${2:-SINGLE_NODE_WRITER}"
  if [[ "$1" == block ]]; then
    echo "volume_capability { block {} access_mode { mode: $mode } }"
  else
    echo "volume_capability { mount { fs_type: \"$1\" } access_mode { mode: $mode } }"
  fi
}

# On failure: the mounts under $WORK go first (deepest first), then the loop devices over
# ublk devices, so the volumes' devices can go.
unmount_all() {
  findmnt -rn -o TARGET | grep "^$WORK/" | sort -r | while read -r target; do
    umount "$target" || echo "cleanup: cannot unmount $target" >&2
  done
  # blk-csi's read-only loop devices over ublk devices hold them open.
  local backing
  for backing in /sys/block/loop*/loop/backing_file; do
    grep -q '^/dev/ublkb' "$backing" 2>/dev/null || continue
    backing="${backing#/sys/block/}"
    losetup -d "/dev/${backing%%/*}" || echo "cleanup: cannot detach /dev/${backing%%/*}" >&2
  done
  return 0
}
