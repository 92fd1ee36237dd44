#!/bin/busybox sh
# shellcheck shell=sh
# /init of the VM initramfs (packed by fetch-kernel.sh; runs under busybox).
# Loads the 9p modules, mounts the host root read-only and switch_roots into
# the guest init named by the kernel parameter blk_init=PATH.
# Every failure powers off: a PID 1 that exits panics the guest, and a guest
# that hangs keeps QEMU waiting until the host's timeout.

bb=/bin/busybox

fail() {
  echo "initramfs: $*"
  $bb sync
  $bb poweroff -f
}

$bb mount -t proc proc /proc || fail "mount /proc failed"
$bb mount -t sysfs sysfs /sys || fail "mount /sys failed"
$bb mount -t devtmpfs devtmpfs /dev || fail "mount /dev failed"
exec </dev/console >/dev/console 2>&1

while read -r module; do
  $bb insmod "/modules/$module" || fail "insmod $module failed"
done </modules/order

$bb mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose /dev/root /newroot ||
  fail "mounting the host root over 9p failed"

[ -n "$blk_init" ] || fail "no blk_init= on the kernel command line"
[ -x "/newroot$blk_init" ] || fail "guest init $blk_init is not executable in the host root"

for fs in dev proc sys; do
  $bb mount --move "/$fs" "/newroot/$fs" || fail "moving /$fs into the new root failed"
done
# shellcheck disable=SC2093 # only reached when exec fails
exec $bb switch_root /newroot "$blk_init"
fail "switch_root to $blk_init failed"
