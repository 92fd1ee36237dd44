# Sourced by the host tests (tests/integration/*_host_test.sh): their scratch directory and its
# clean-up, their verdicts and their waits. pass/fail print one line each and count the failures;
# wait_for polls a condition. At exit, the agent in $agent_pid and every pid in started[] are
# killed and $work is removed.

failures=0
work="$(mktemp -d)"
agent_pid=""
started=()

cleanup() {
  if [[ -n "$agent_pid" ]]; then kill -KILL "$agent_pid" 2>/dev/null || true; fi
  for pid in "${started[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

pass() { echo "ok   - $1"; }
fail() {
  echo "FAIL - $1"
  failures=$((failures + 1))
}

wait_for() { # wait_for SECONDS COMMAND...: polls until COMMAND succeeds; false at the deadline
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    if ((SECONDS >= deadline)); then return 1; fi
    sleep 0.05 # polling interval
  done
}
