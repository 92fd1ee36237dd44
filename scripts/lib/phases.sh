# shellcheck shell=bash
# Phase timing and test counts for the test and CI scripts. Sourced.
#   phase NAME CMD...  runs CMD (its output also kept beside the log) and appends
#                      "NAME SECONDS STATUS" to $BLK_PHASE_LOG (phase_record: a phase timed
#                      by the caller)
#   phase_report       prints the phases so far with their times and the wall clock since the
#                      run started (BLK_RUN_STARTED), then one closing line
#                      counting the tests of every phase: `tests: N passed, N failed, N skipped`
#                      (from ctest's and tests/vm/run-scenarios.sh's summaries)
# The log is shared by the scripts of one run (exported to the ones it starts).
if [[ -z ${BLK_RUN_STARTED:-} ]]; then
  BLK_RUN_STARTED="$(date +%s)"
  export BLK_RUN_STARTED
fi
if [[ -z ${BLK_PHASE_LOG:-} ]]; then
  BLK_PHASE_LOG="$(mktemp -t blk-phases.XXXXXX)"
  export BLK_PHASE_LOG
fi
mkdir -p "$BLK_PHASE_LOG.out"

# phase_record NAME SECONDS STATUS: a phase timed by its caller.
phase_record() { echo "$1 $2 $3" >>"$BLK_PHASE_LOG"; }

phase() {
  local name="$1" start=$SECONDS log="$BLK_PHASE_LOG.out/$1.log" status
  shift
  echo "=== phase: $name"
  { "$@" 2>&1 && status=0 || status=$?; echo "$status" >"$log.status"; } | tee "$log" || true
  status="$(cat "$log.status" 2>/dev/null || echo 1)"
  phase_record "$name" $((SECONDS - start)) "$status"
  return "$status"
}

phase_report() {
  [[ -s $BLK_PHASE_LOG ]] || return 0
  echo
  echo "Phase times:"
  awk -v wall=$(($(date +%s) - BLK_RUN_STARTED)) '{
      printf "  %-24s %5ds  %3dm%02ds%s\n", $1, $2, $2 / 60, $2 % 60, ($3 == 0 ? "" : "  (failed)")
    }
    END { printf "  %-24s %5ds  %3dm%02ds  (wall clock)\n", "total", wall, wall / 60, wall % 60 }' \
    "$BLK_PHASE_LOG"
  cat "$BLK_PHASE_LOG.out"/*.log 2>/dev/null | awk '
    /tests passed, [0-9]+ tests? failed out of [0-9]+/ {
      for (i = 1; i <= NF; i++) if ($i == "out") { total += $(i + 2); ctest_failed += $(i - 3) }
    }
    /\*\*\*Skipped/ { ctest_skipped++ }
    /^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { passed += $1; failed += $3; skipped += $5 }
    END {
      failed += ctest_failed
      passed += total - ctest_failed - ctest_skipped
      printf "tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped + ctest_skipped
    }'
}
