#!/usr/bin/env bash
# Guest self-test of the VM test bed: the kernel the test bed promises is the
# one running, with ublk loaded and the environment run-vm.sh describes.
set -euo pipefail

failures=0
check() {
  local what="$1"
  shift
  if "$@"; then
    echo "ok   $what"
  else
    echo "FAIL $what"
    failures=$((failures + 1))
  fi
}

echo "kernel: $(uname -r) (flavour ${BLK_VM_KERNEL:-unset}, expected ${BLK_VM_RELEASE:-unset})"
check "uname -r is the fetched kernel" test "$(uname -r)" = "${BLK_VM_RELEASE:-}"
check "/dev/ublk-control is a character device" test -c /dev/ublk-control
check "ublk_drv is loaded" test -d /sys/module/ublk_drv
for param in /sys/module/ublk_drv/parameters/*; do
  [[ -r "$param" ]] && echo "     ublk_drv.$(basename "$param") = $(cat "$param")"
done
check "null_blk created /dev/nullb0" test -b /dev/nullb0
check "/dev/fd works" test -e /dev/fd/0
check "lo is up" test $(($(cat /sys/class/net/lo/flags) & 1)) = 1
root_is_read_only() { ! touch /usr/.blk-vm-probe 2>/dev/null; }
tmp_is_writable() { local t && t="$(mktemp)" && rm "$t"; }
out_is_writable() { echo probe >"$BLK_VM_OUT/kernel-facts.probe" && rm "$BLK_VM_OUT/kernel-facts.probe"; }
check "the host root is read-only" root_is_read_only
check "/tmp is writable" tmp_is_writable
check "BLK_VM_OUT is writable" out_is_writable
check "the cwd is the host's" test -e "$PWD"
echo "cpus: $(nproc), memory: $(awk '/MemTotal/ { print $2 / 1024 " MiB" }' /proc/meminfo)"

if ((failures > 0)); then
  echo "kernel_facts: $failures check(s) failed"
  exit 1
fi
echo "kernel_facts: all checks passed"
