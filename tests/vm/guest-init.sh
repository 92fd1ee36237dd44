#!/bin/bash
# PID 1 of the test VM after switch_root (started by tests/vm/initramfs-init.sh,
# booted by tests/vm/run-vm.sh). The root is the host's, read-only.
# Kernel parameters: blk_out=DIR (the writable share's mount point, the host
# path), and DIR/.vm/job (written by run-vm.sh) holds what to run.
# Whatever happens, this ends in `poweroff -f`: a PID 1 that exits panics the
# guest, and a hung guest keeps QEMU waiting until the host's timeout.
set -uo pipefail

# Everything runs inside main: bash parses a function whole before running it,
# so editing this file while it runs (the VM takes minutes) cannot derail it.
main() {
  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

  power_off() {
    sync
    exec busybox poweroff -f
  }

  fail() {
    echo "guest-init: $*"
    power_off
  }

  trap 'fail "unexpected exit"' EXIT

  mount_or_fail() {
    mount "$@" || fail "mount $* failed"
  }

  [[ -n "${blk_out:-}" ]] || fail "no blk_out= on the kernel command line"

  mount_or_fail -t tmpfs -o mode=0755 tmpfs /run
  # Keep the host's /tmp reachable: tmpfs on /tmp hides it, and the build tree,
  # the cwd or the script may live there.
  mkdir -p /run/host-tmp
  mount_or_fail --bind /tmp /run/host-tmp
  mount_or_fail -t tmpfs -o mode=1777 tmpfs /tmp
  mkdir -p /dev/pts /dev/shm
  mount_or_fail -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
  mount_or_fail -t tmpfs -o mode=1777 tmpfs /dev/shm
  ln -sf /proc/self/fd /dev/fd
  ln -sf /proc/self/fd/0 /dev/stdin
  ln -sf /proc/self/fd/1 /dev/stdout
  ln -sf /proc/self/fd/2 /dev/stderr

  # The job file sits in the writable share; read it through the host root
  # (the same file) before that share is mounted.
  job="/run/host-tmp/${blk_out#/tmp/}/.vm/job"
  [[ "$blk_out" == /tmp/* ]] || job="$blk_out/.vm/job"
  [[ -r "$job" ]] || fail "missing job file $job"
  job_cwd=/ job_flavour="" job_release="" job_modbase="" job_argv=() job_env=() job_keep=()
  # shellcheck source=/dev/null
  source "$job" || fail "cannot read $job"
  ((${#job_argv[@]} > 0)) || fail "$job names no script"

  # The cwd, the script and any --keep path under the host's /tmp: bind them
  # into the guest's /tmp at the same path (read-only, like the rest of the root).
  for path in "$job_cwd" "${job_argv[0]}" "${job_keep[@]}"; do
    [[ "$path" == /tmp/* ]] || continue
    [[ -d "/run/host-tmp/${path#/tmp/}" ]] || path="$(dirname "$path")"
    [[ "$path" == /tmp/* ]] || continue
    mkdir -p "$path"
    mount_or_fail --bind "/run/host-tmp/${path#/tmp/}" "$path"
  done

  # Mounted last, so that a bind above cannot hide it.
  mkdir -p "$blk_out"
  mount_or_fail -t 9p -o trans=virtio,version=9p2000.L,msize=512000 blkout "$blk_out"

  hostname blk-vm
  ip link set lo up || echo "guest-init: cannot bring up lo"

  # ublk is what the tests are about; nvme and null_blk only serve some of them.
  modprobe -d "$job_modbase" ublk_drv || fail "modprobe ublk_drv failed"
  modprobe -d "$job_modbase" nvme || echo "guest-init: modprobe nvme failed"
  modprobe -d "$job_modbase" null_blk nr_devices=1 queue_mode=2 irqmode=0 submit_queues=2 ||
    echo "guest-init: modprobe null_blk failed"
  # Scenarios mount file systems on ublk devices (e.g. to test deletes of mounted volumes).
  modprobe -d "$job_modbase" ext4 || echo "guest-init: modprobe ext4 failed"
  # blk-csi's read-only raw block publishes are loop devices over ublk devices.
  modprobe -d "$job_modbase" loop || echo "guest-init: modprobe loop failed"

  read -r uptime _ </proc/uptime
  echo "$uptime" >"$blk_out/.vm/boot-seconds"

  cd "$job_cwd" || fail "cannot cd to $job_cwd"
  env -i "${job_env[@]}" \
    PATH="$PATH" HOME=/root LANG=C.UTF-8 TERM=dumb \
    BLK_VM_KERNEL="$job_flavour" BLK_VM_RELEASE="$job_release" BLK_VM_OUT="$blk_out" \
    BLK_VM_MODBASE="$job_modbase" \
    "${job_argv[@]}" </dev/null >>"$blk_out/guest.log" 2>&1
  status=$?
  echo "$status" >"$blk_out/exit-status"
  trap - EXIT
  power_off
}

main "$@"
