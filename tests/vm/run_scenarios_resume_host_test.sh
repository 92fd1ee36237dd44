#!/usr/bin/env bash
# run-scenarios.sh boots a VM once more when its guest died in the middle of the suite, for the
# scenarios that never reported (the one it died in included), and keeps the death on record in
# the summary. run-vm.sh is a fake beside a copy of run-scenarios.sh that plays one scripted boot
# per call: "die:NAME" reports every scenario before NAME and dies (status 125, a panic on the
# console), "ok" reports every scenario it was asked for.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d /tmp/run-scenarios-resume.XXXXXX)"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

mkdir -p "$work/vm" "$work/scenarios" "$work/build/bin"
cp "$here/run-scenarios.sh" "$work/vm/"
for name in 10-first 20-second 30-third; do
  : >"$work/scenarios/$name.sh"
done
cat >"$work/vm/run-vm.sh" <<'FAKE'
#!/usr/bin/env bash
out=""
while (($# > 0)); do
  case "$1" in
    --out) out="$2" && shift ;;
    --) break ;;
  esac
  shift
done
read -ra plan <<<"$FAKE_VM_PLAN"
boot=$(($(cat "$FAKE_VM_BOOTS" 2>/dev/null || echo 0) + 1))
echo "$boot" >"$FAKE_VM_BOOTS"
step="${plan[$((boot - 1))]:-ok}"
echo "${BLK_SCENARIOS:-}" >>"$FAKE_VM_FILTERS"
: >"$out/results.txt"
for path in "$BLK_SCENARIO_DIR"/[0-9][0-9]-*.sh; do
  name="$(basename "$path" .sh)"
  [[ -z "${BLK_SCENARIOS:-}" || "$name" =~ $BLK_SCENARIOS ]] && echo "$name"
done >"$out/planned.txt"
while read -r name; do
  if [[ "$step" == "die:$name" ]]; then
    echo "[   42.0] Kernel panic - not syncing: fake panic in $name" >>"$out/console.log"
    exit 125
  fi
  echo "=== RUN $name" >>"$out/guest.log"
  echo "PASS $name 1" >>"$out/results.txt"
done <"$out/planned.txt"
exit 0
FAKE
chmod +x "$work/vm/run-vm.sh"

# run_case NAME PLAN WANT_STATUS WANT_BOOTS: the suite under PLAN exits WANT_STATUS after WANT_BOOTS.
run_case() {
  local name="$1" plan="$2" want_status="$3" want_boots="$4" status=0 boots
  rm -f "$work/boots" "$work/filters"
  FAKE_VM_PLAN="$plan" FAKE_VM_BOOTS="$work/boots" FAKE_VM_FILTERS="$work/filters" \
    BLK_VM_KERNELS=lts BLK_VM_RESULTS="$work/results-$name" BLK_SCENARIO_DIR="$work/scenarios" \
    "$work/vm/run-scenarios.sh" "$work/build" >"$work/$name.log" 2>&1 || status=$?
  ((status == want_status)) || fail "$name: exited $status, want $want_status ($(cat "$work/$name.log"))"
  boots="$(cat "$work/boots" 2>/dev/null || echo 0)"
  [[ "$boots" == "$want_boots" ]] || fail "$name: $boots boots, want $want_boots ($(cat "$work/$name.log"))"
  echo "ok: $name: exit $status after $want_boots boot(s)"
}

expect_log() {
  grep -qF -- "$2" "$work/$1.log" || fail "$1: no '$2' in its output: $(cat "$work/$1.log")"
}

run_case all-ok "ok" 0 1

run_case died-once "die:20-second ok" 0 2
[[ "$(sed -n 2p "$work/filters")" == '^(20-second|30-third)$' ]] ||
  fail "died-once: the second boot ran '$(sed -n 2p "$work/filters")', not the two unreported"
expect_log died-once "3 passed, 0 failed, 0 skipped"
expect_log died-once "the VM died during 20-second and was booted again; its console said:"
expect_log died-once "Kernel panic - not syncing: fake panic in 20-second"
grep -q "fake panic" "$work/results-died-once/lts/died-console.log" || fail "the died boot's console was not kept"

# The same death again: the scenario fails, nothing is booted a third time.
run_case died-twice "die:20-second die:20-second ok" 1 2
expect_log died-twice "1 passed, 2 failed, 0 skipped"
expect_log died-twice "20-second                                FAIL (not run: the VM exited with status 125)"
echo "PASS"
