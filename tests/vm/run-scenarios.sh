#!/usr/bin/env bash
# Usage: tests/vm/run-scenarios.sh BUILD_DIR [REGEX]
#
# The VM suite: for each kernel flavour (newest and lts, both at once) boots ONE
# VM that runs tests/vm/scenarios/all.sh BUILD_DIR, i.e. every scenario
# tests/vm/scenarios/NN-*.sh (only those matching REGEX, when given). The
# guest gets two NVMe namespaces backed by sparse files: 512-byte and
# 4096-byte logical blocks (see nvme_namespace in scenarios/lib.sh).
# Prints a summary and, last, `N passed, M failed, K skipped`, counting
# scenario x kernel. A guest that dies mid-suite is booted once more for the
# scenarios that never reported (the death is printed in the summary); one
# still without a verdict counts as failed; one that skipped itself (lib.sh's skip, e.g. one_kernel_only)
# as skipped.
# Exits 0 only when everything passed.
#
# Environment:
#   BLK_VM_KERNELS   flavours to boot (default "newest lts")
#   BLK_VM_PARALLEL  0: boot them one after the other (default 1: all at once, each
#                    VM's vCPUs then on one host thread, run-vm.sh --tcg single)
#   BLK_VM_RESULTS   where the VM outputs go (default BUILD_DIR/vm-results)
#   BLK_VM_TIMEOUT   seconds per VM (default 2400)
#   BLK_SCENARIO_TIMEOUT, BLK_SCENARIO_DIR: passed on to all.sh
set -euo pipefail

# The first line of the scenario's output that says why it failed (lib.sh's `FAIL: ...`, or
# all.sh's time-out), else its last lines, so the summary at the end of CI's log names it.
failure_reason() {
  awk -v run="=== RUN $2" '
    $0 == run { inside = 1; next }
    inside && /^=== RUN / { exit }
    inside && (/^FAIL: / || / timed out after /) { print; found = 1; exit }
    inside && NF && !/^FAIL [0-9][0-9]-/ { last[++n % 3] = $0 }
    END { if (!found) for (i = n - 2; i <= n; i++) if (i > 0) printf "%s | ", last[i % 3] }
  ' "$1" 2>/dev/null | cut -c1-300
}

# Everything runs inside main: bash parses a function whole before running it,
# so editing this file while it runs (the VM takes minutes) cannot derail it.
main() {
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  build_dir="${1:?usage: run-scenarios.sh BUILD_DIR [REGEX]}"
  [[ -d "$build_dir/bin" ]] || {
    echo "run-scenarios: $build_dir/bin is not a directory (build first)" >&2
    exit 2
  }
  build_dir="$(cd "$build_dir" && pwd)"
  if (($# > 1)); then
    export BLK_SCENARIOS="$2"
  fi
  results_root="${BLK_VM_RESULTS:-$build_dir/vm-results}"
  read -ra kernels <<<"${BLK_VM_KERNELS:-newest lts}"
  scenario_dir="${BLK_SCENARIO_DIR:-$here/scenarios}"
  tcg=multi
  [[ ${BLK_VM_PARALLEL:-1} != 0 ]] && ((${#kernels[@]} > 1)) && tcg=single

  expected=()
  for path in "$scenario_dir"/[0-9][0-9]-*.sh; do
    [[ -e "$path" ]] || continue
    name="$(basename "$path" .sh)"
    [[ -z "${BLK_SCENARIOS:-}" || "$name" =~ $BLK_SCENARIOS ]] && expected+=("$name")
  done
  ((${#expected[@]} > 0)) || {
    echo "run-scenarios: no scenario matches in $scenario_dir" >&2
    exit 2
  }

  # run_suite KERNEL OUT: one VM of that flavour running all.sh (BLK_SCENARIOS chooses which),
  # with two NVMe namespaces on sparse files; its outputs in OUT; returns its status.
  run_suite() {
    local kernel="$1" out="$2" status=0
    truncate -s 256M "$out/nvme-512.img" "$out/nvme-4k.img"
    "$here/run-vm.sh" --kernel "$kernel" --out "$out" --tcg "$tcg" --timeout "${BLK_VM_TIMEOUT:-2400}" \
      --nvme "$out/nvme-512.img:512" --nvme "$out/nvme-4k.img:4096" \
      --keep "$build_dir" --keep "$scenario_dir" \
      -- "$here/scenarios/all.sh" "$build_dir" || status=$?
    rm -f "$out/nvme-512.img" "$out/nvme-4k.img"
    return "$status"
  }

  # boot KERNEL: runs the suite in one VM of that flavour; its exit status goes to OUT/vm-status.
  boot() {
    local kernel="$1" out="$results_root/$1" attempt vm_status
    # A guest that dies before its scenarios start (seen once: an int3 oops while the kernel
    # patched its own text at boot under multi-threaded TCG) is booted once more; the first
    # console log is kept beside the second.
    for attempt in 1 2; do
      rm -rf "$out"
      mkdir -p "$out"
      if [[ -f "$results_root/$kernel-boot-1.console.log" ]]; then
        mv "$results_root/$kernel-boot-1.console.log" "$out/boot-1.console.log"
      fi
      vm_status=0
      run_suite "$kernel" "$out" || vm_status=$?
      ((vm_status != 0 && attempt == 1)) && [[ ! -s "$out/planned.txt" ]] || break
      echo "run-scenarios: the $kernel VM stopped before any scenario started (status" \
        "$vm_status); booting it again. Its console:" >&2
      grep -m 3 -E "Oops|BUG|panic" "$out/console.log" >&2 || tail -n 5 "$out/console.log" >&2
      mv "$out/console.log" "$results_root/$kernel-boot-1.console.log" 2>/dev/null || true
    done
    if ((vm_status == 125)) && [[ -s "$out/planned.txt" ]]; then
      resume_after_death "$kernel" "$out"
    fi
    echo "$vm_status" >"$out/vm-status"
  }

  # A guest that died in the middle of its suite (seen once in CI, on 6.12: no verdict after
  # 68, and no console kept) is booted once more for the scenarios that never reported; the one
  # it died in runs again. The death stays on record: OUT/died.txt names the scenario and the
  # console's oops line, and the summary prints both, so a crash that comes back fails twice.
  resume_after_death() {
    local kernel="$1" out="$2" name remaining=() first_status=$vm_status
    while read -r name; do
      awk -v n="$name" '$2 == n { found = 1 } END { exit !found }' "$out/results.txt" 2>/dev/null ||
        remaining+=("$name")
    done <"$out/planned.txt"
    ((${#remaining[@]} > 0)) || return 0
    {
      echo "${remaining[0]}"
      grep -m1 -E 'Oops|Kernel panic|BUG:|general protection' "$out/console.log" ||
        tail -n 1 "$out/console.log" || true
    } >"$out/died.txt"
    cp "$out/console.log" "$out/died-console.log"
    echo "run-scenarios: the $kernel VM died (status $first_status) during ${remaining[0]};" \
      "its last console lines:" >&2
    tail -n 40 "$out/console.log" >&2 || true
    echo "run-scenarios: booting the $kernel VM again for the ${#remaining[@]} scenarios that" \
      "never reported" >&2
    local regex resume="$out/resume"
    regex="^($(IFS='|'; echo "${remaining[*]}"))\$"
    mkdir -p "$resume"
    vm_status=0
    BLK_SCENARIOS="$regex" run_suite "$kernel" "$resume" || vm_status=$?
    cat "$resume/results.txt" >>"$out/results.txt" 2>/dev/null || true
    cat "$resume/guest.log" >>"$out/guest.log" 2>/dev/null || true
    cp "$resume/console.log" "$out/console.log" 2>/dev/null || true
  }

  mkdir -p "$results_root"
  started=$SECONDS
  pids=()
  for kernel in "${kernels[@]}"; do
    if [[ ${BLK_VM_PARALLEL:-1} == 0 ]]; then
      boot "$kernel"
    else
      boot "$kernel" &
      pids+=($!)
    fi
  done
  ((${#pids[@]} == 0)) || wait "${pids[@]}"

  passed=0 failed=0 skipped=0
  summary=()
  for kernel in "${kernels[@]}"; do
    out="$results_root/$kernel"
    vm_status="$(cat "$out/vm-status" 2>/dev/null || echo 125)"
    planned=("${expected[@]}")
    # The guest's own list wins: the scenarios may have changed since this
    # script looked (it snapshots them when it boots).
    if [[ -s "$out/planned.txt" ]]; then
      mapfile -t planned <"$out/planned.txt"
    fi
    for name in "${planned[@]}"; do
      verdict="$(awk -v n="$name" '$2 == n { print $1 " " $3 "s" }' "$out/results.txt" 2>/dev/null)"
      if [[ "$verdict" == PASS* ]]; then
        passed=$((passed + 1))
      elif [[ "$verdict" == SKIP* ]]; then
        skipped=$((skipped + 1))
      else
        failed=$((failed + 1))
        if [[ -n "$verdict" ]]; then
          verdict+=": $(failure_reason "$out/guest.log" "$name")"
        else
          verdict="FAIL (not run: the VM exited with status $vm_status)"
        fi
      fi
      summary+=("$(printf '%-6s  %-40s %s' "$kernel" "$name" "$verdict")")
    done
    if [[ -s "$out/died.txt" ]]; then
      summary+=("$(printf '%-6s  the VM died during %s and was booted again; its console said: %s' \
        "$kernel" "$(sed -n 1p "$out/died.txt")" "$(sed -n 2p "$out/died.txt" | cut -c1-160)")")
    fi
    if ((vm_status != 0 && vm_status != 1)); then
      echo "run-scenarios: the $kernel VM failed (status $vm_status); its last console lines:" >&2
      tail -n 40 "$out/console.log" >&2 || true
    fi
  done

  echo
  echo "VM scenarios (${kernels[*]}: $((SECONDS - started))s; logs in $results_root):"
  printf '  %s\n' "${summary[@]}"
  echo "$passed passed, $failed failed, $skipped skipped"
  ((failed == 0))
}

main "$@"
