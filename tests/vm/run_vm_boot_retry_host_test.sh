#!/usr/bin/env bash
# run-vm.sh boots a guest again when its kernel died (or hung) before the
# script started, and never when the script had started. QEMU is a fake on
# PATH that plays one scripted boot per call ("crash": a console oops and exit,
# "hang": never reach the script, "died": start the script and exit without a
# status, "ok": run to exit status 0), with a fake kernel cache; a real TCG
# guest crashes at boot too rarely to test this with.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
run_vm="$here/run-vm.sh"
work="$(mktemp -d /tmp/run-vm-retry.XXXXXX)"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The fake kernel cache fetch-kernel.sh accepts as complete, with an up-to-date initramfs.
kernel="$work/cache/newest/kernel"
mkdir -p "$kernel"
echo 7.0.0-fake >"$kernel/version"
echo lib/modules >"$kernel/modbase"
: >"$kernel/vmlinuz"
: >"$kernel/initramfs.cpio"
sha256sum <"$here/initramfs-init.sh" | cut -d' ' -f1 >"$kernel/initramfs.init-sha256"
export BLK_VM_CACHE="$work/cache"

mkdir -p "$work/bin"
cat >"$work/bin/qemu-system-x86_64" <<'FAKE'
#!/usr/bin/env bash
console="" out=""
while (($# > 0)); do
  case "$1" in
    -serial) console="${2#file:}" && shift ;;
    -append) for word in $2; do [[ "$word" != blk_out=* ]] || out="${word#blk_out=}"; done && shift ;;
  esac
  shift
done
read -ra plan <<<"$FAKE_QEMU_PLAN"
boot=$(($(cat "$FAKE_QEMU_BOOTS" 2>/dev/null || echo 0) + 1))
echo "$boot" >"$FAKE_QEMU_BOOTS"
case "${plan[$((boot - 1))]:-ok}" in
  crash) echo "[    1.5] Oops: int3: 0000 [#1] SMP NOPTI" >>"$console" ;;
  hang) exec sleep 600 ;;
  died)
    echo 1.0 >"$out/.vm/boot-seconds"
    echo "script started" >>"$out/guest.log"
    ;;
  ok)
    echo 1.0 >"$out/.vm/boot-seconds"
    echo "script ran in boot $boot" >>"$out/guest.log"
    echo 0 >"$out/exit-status"
    ;;
esac
FAKE
chmod +x "$work/bin/qemu-system-x86_64"
export PATH="$work/bin:$PATH"

# run_case NAME PLAN WANT_STATUS WANT_BOOTS: run-vm.sh under PLAN exits WANT_STATUS after WANT_BOOTS.
run_case() {
  local name="$1" plan="$2" want_status="$3" want_boots="$4" status=0
  rm -f "$work/boots"
  FAKE_QEMU_PLAN="$plan" FAKE_QEMU_BOOTS="$work/boots" \
    "$run_vm" --kernel newest --out "$work/out-$name" --quiet -- /bin/true \
    >"$work/$name.log" 2>&1 || status=$?
  ((status == want_status)) || fail "$name: run-vm exited $status, want $want_status ($(cat "$work/$name.log"))"
  local boots
  boots="$(cat "$work/boots" 2>/dev/null || echo 0)"
  [[ "$boots" == "$want_boots" ]] || fail "$name: $boots boots, want $want_boots ($(cat "$work/$name.log"))"
  echo "ok: $name: exit $status after $want_boots boot(s)"
}

run_case first-boot-ok "ok" 0 1
run_case crash-then-ok "crash ok" 0 2
grep -q "guest died before its script started (Oops: int3: 0000 \[#1\] SMP NOPTI); booting again (2 of 3" \
  "$work/crash-then-ok.log" || fail "no retry message naming the oops: $(cat "$work/crash-then-ok.log")"
grep -q "Oops: int3" "$work/out-crash-then-ok/.vm/console-boot1.log" ||
  fail "the crashed boot's console was not kept"
[[ "$(cat "$work/out-crash-then-ok/guest.log")" == "script ran in boot 2" ]] ||
  fail "guest.log is not the second boot's alone"
run_case always-crash "crash crash crash ok" 125 3
BLK_VM_BOOT_DEADLINE=1 run_case hang-then-ok "hang ok" 0 2
grep -q "did not reach its script in 1s" "$work/hang-then-ok.log" || fail "no message for the hung boot"
# The script started: whatever happened next is the script's run, never repeated.
run_case died-in-script "died ok" 125 1
BLK_VM_BOOT_DEADLINE=soon run_case bad-deadline "ok" 2 0
grep -q "BLK_VM_BOOT_DEADLINE wants seconds, got 'soon'" "$work/bad-deadline.log" ||
  fail "a bad BLK_VM_BOOT_DEADLINE was not refused clearly"
echo "PASS"
