# Sourced by the host tests (tests/integration/*_host_test.sh): their verdicts and their waits.
# pass/fail print one line each and count the failures; wait_for polls a condition.

failures=0

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
