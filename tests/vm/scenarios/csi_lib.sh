# The blk-csi helpers scenarios 65 and 67 share; sourced after lib.sh.

CSI_SOCKET="$WORK/csi/csi.sock"
CSI_PID=""

stop_csi() {
  [[ -n "$CSI_PID" ]] || return 0
  kill -TERM "$CSI_PID"
  wait_gone "$CSI_PID" 20 || fail "blk-csi did not exit within 20s of SIGTERM"
  wait "$CSI_PID" || fail "blk-csi exited with status $? after SIGTERM"
  CSI_PID=""
}

csi() { blk_csi_client "unix://$CSI_SOCKET" "$@"; }

# On failure: the mounts under $WORK go first (deepest first), so the volumes' devices can go.
unmount_all() {
  findmnt -rn -o TARGET | grep "^$WORK/" | sort -r | while read -r target; do
    umount "$target" || echo "cleanup: cannot unmount $target" >&2
  done
  return 0
}
