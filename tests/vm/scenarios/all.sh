#!/usr/bin/env bash
# Usage (in the guest, through run-vm.sh): tests/vm/scenarios/all.sh BUILD_DIR
#
# Runs every tests/vm/scenarios/[0-9][0-9]-*.sh in order with BUILD_DIR/bin
# first on PATH, one process group each, and prints `PASS name`, `FAIL name`
# or `SKIP name` (exit status 77: lib.sh's skip) per scenario. A failing
# scenario does not stop the others, but a kernel oops does: the scenario
# during which the kernel logged one is killed at once and fails, and no
# other runs (the host counts them as not run). After each scenario,
# whatever it left behind (processes, mounts of ublk devices, ublk devices,
# work directories) is removed, and leaving ublk devices behind fails it.
# Results also go to $BLK_VM_OUT/results.txt. Exits 1 when any failed.
#
# Environment:
#   BLK_SCENARIOS         only run scenarios whose name matches this regex
#   BLK_SCENARIO_TIMEOUT  seconds per scenario (default 600)
#   BLK_SCENARIO_DIR      where the scenarios are (default: next to this file)
set -uo pipefail

# Everything runs inside main: bash parses a function whole before running it,
# so editing this file while it runs (the VM takes minutes) cannot derail it.
main() {
  build_dir="${1:?usage: all.sh BUILD_DIR}"
  [[ -d "$build_dir/bin" ]] || {
    echo "all.sh: $build_dir/bin is not a directory"
    exit 2
  }
  build_dir="$(cd "$build_dir" && pwd)"
  scenario_dir="${BLK_SCENARIO_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
  limit="${BLK_SCENARIO_TIMEOUT:-600}"
  filter="${BLK_SCENARIOS:-}"
  results="${BLK_VM_OUT:?all.sh runs in the test VM (BLK_VM_OUT unset)}/results.txt"

  export PATH="$build_dir/bin:$PATH"
  export BLK_BUILD_DIR="$build_dir"
  # The source tree, for scenarios that run its other scripts (they run from a snapshot).
  BLK_SOURCE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
  export BLK_SOURCE_DIR
  : >"$results"

  ublk_devices() {
    local dev
    for dev in /dev/ublkc[0-9]*; do
      [[ -e "$dev" ]] && echo "$dev"
    done
    return 0
  }

  # Kills what the scenario left in its process group; TERM first, then KILL.
  kill_group() {
    local pgid="$1" deadline=$((SECONDS + 10))
    kill -0 -- "-$pgid" 2>/dev/null || return 0
    echo "cleanup: killing processes the scenario left running:"
    ps -e -o pgid=,pid=,args= | awk -v g="$pgid" '$1 == g { $1 = ""; print " " $0 }'
    kill -TERM -- "-$pgid" 2>/dev/null
    while kill -0 -- "-$pgid" 2>/dev/null && ((SECONDS < deadline)); do
      sleep 0.1
    done
    kill -KILL -- "-$pgid" 2>/dev/null
    return 0
  }

  # clean_up_after PGID DEVICES_BEFORE: returns 1 when the scenario left ublk
  # devices behind (beyond those that existed before it), after removing them.
  clean_up_after() {
    local pgid="$1" before="$2" source target rest dev
    local left=()
    kill_group "$pgid"
    while read -r source target rest; do
      if [[ "$source" == /dev/ublkb* ]]; then
        echo "cleanup: unmounting $target ($source)"
        umount -l "$target"
      fi
    done </proc/mounts
    rm -rf /tmp/blk-*
    for dev in $(ublk_devices); do
      [[ " $before " == *" $dev "* ]] || left+=("$dev")
    done
    ((${#left[@]} > 0)) || return 0
    echo "FAIL: the scenario left ublk devices behind: ${left[*]}"
    if command -v blk_vm_reap >/dev/null; then
      blk_vm_reap "${left[@]#/dev/ublkc}" || echo "cleanup: blk_vm_reap failed"
    else
      echo "cleanup: no blk_vm_reap in PATH to remove them; later scenarios will see them"
    fi
    return 1
  }

  # An oops ends the scenario at once (it would otherwise hang until its time-out) and the run.
  oops=/run/blk-vm-oops
  : >"$oops"
  # watch_for_oops PGID MARKER: kills the group at the first oops logged after MARKER. The whole
  # log is read from its start, so a watcher that starts late misses nothing; bash's read takes
  # each line as it comes (mawk would wait for a full buffer).
  watch_for_oops() {
    local line after_marker=0
    while IFS= read -r line; do
      if ((after_marker)); then
        if [[ "$line" =~ Oops|BUG:|panic ]]; then
          echo "$line" >"$oops"
          kill -KILL -- "-$1" 2>/dev/null
          return 0
        fi
      elif [[ "$line" == *"$2" ]]; then
        after_marker=1
      fi
    done < <(dmesg --follow 2>/dev/null)
  }
  stop_watcher() {
    pkill -P "$1" 2>/dev/null
    kill "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
  }

  # Run a copy: bash reads a script as it goes, so a scenario edited on the
  # host during the run would otherwise execute a mix of old and new lines.
  snapshot=/run/blk-vm-scenarios
  rm -rf "$snapshot"
  cp -a "$scenario_dir/." "$snapshot/"

  passed=0 failed=0 skipped=0
  scenarios=()
  for path in "$snapshot"/[0-9][0-9]-*.sh; do
    [[ -e "$path" ]] || continue
    name="$(basename "$path" .sh)"
    [[ -z "$filter" || "$name" =~ $filter ]] && scenarios+=("$path")
  done
  # The host's summary counts a planned scenario without a verdict as failed.
  for path in "${scenarios[@]}"; do
    basename "$path" .sh
  done >"$BLK_VM_OUT/planned.txt"
  echo "all.sh: ${#scenarios[@]} scenario(s) on $(uname -r), build $build_dir"

  # only= the kernel a scenario runs on only (lib.sh's one_kernel_only), or empty: read here so
  # that a scenario for the other kernel is not even started (a start costs seconds under TCG).
  only_kernel_of() {
    local line
    only=""
    while IFS= read -r line; do
      if [[ "$line" =~ ^one_kernel_only\ ([a-z]+) ]]; then
        only="${BASH_REMATCH[1]}"
        return
      fi
    done <"$1"
  }

  for path in "${scenarios[@]}"; do
    name="$(basename "$path" .sh)"
    echo "=== RUN $name"
    only_kernel_of "$path"
    if [[ -n "$only" && -n "${BLK_VM_KERNEL:-}" && "$only" != "$BLK_VM_KERNEL" ]]; then
      echo "SKIP: runs on the $only kernel only"
      echo "SKIP $name (0s)"
      echo "SKIP $name 0" >>"$results"
      skipped=$((skipped + 1))
      continue
    fi
    started=$SECONDS
    marker="all.sh: starting $name"
    echo "$marker" >/dev/kmsg
    before="$(ublk_devices | tr '\n' ' ')"
    # timeout puts the scenario in a process group of its own (pgid = its pid),
    # so anything the scenario forgot can be found and killed afterwards.
    BLK_SCENARIO="$name" BLK_SCENARIO_OUT="$BLK_VM_OUT/scenarios/$name" \
      timeout --kill-after=10 "$limit" bash "$path" </dev/null &
    pgid=$!
    watch_for_oops "$pgid" "$marker" &
    watcher=$!
    status=0
    wait "$pgid" || status=$?
    stop_watcher "$watcher"
    if [[ -s "$oops" ]]; then
      # Nothing after an oops can be trusted, and cleaning up may hang on what it broke.
      echo "FAIL: the kernel oopsed during $name: $(head -n 1 "$oops")"
      echo "FAIL $name $((SECONDS - started))" >>"$results"
      echo "all.sh: stopping after the oops in $name; the remaining scenarios are not run"
      exit 1
    fi
    ((status == 124 || status == 137)) && echo "$name: timed out after ${limit}s"
    clean_up_after "$pgid" "$before" || { ((status != 0 && status != 77)) || status=1; }
    seconds=$((SECONDS - started))
    if ((status == 0)); then
      verdict=PASS passed=$((passed + 1))
    elif ((status == 77)); then
      verdict=SKIP skipped=$((skipped + 1))
    else
      verdict=FAIL failed=$((failed + 1))
    fi
    echo "$verdict $name (${seconds}s)"
    echo "$verdict $name $seconds" >>"$results"
  done

  echo "all.sh: $passed passed, $failed failed, $skipped skipped on $(uname -r)"
  ((failed == 0))
}

main "$@"
