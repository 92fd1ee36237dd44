# shellcheck shell=bash
# Shared helpers for VM scenarios (tests/vm/scenarios/NN-*.sh), sourced first:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# A scenario is a bash script run as root in the guest by all.sh; it passes by
# exiting 0. Everything it starts through these helpers is cleaned up on exit,
# also on failure.
#
# Provides:
#   WORK                        a fresh directory on the guest's tmpfs
#   LOG_DIR                     where logs go (kept on the host afterwards)
#   on_exit CMD...              run CMD at exit (last registered runs first)
#   fail MESSAGE                end the scenario as failed
#   skip REASON                 end the scenario as skipped (SKIP, never counted as passed)
#   one_kernel_only KERNEL WHY  run on that kernel (newest|lts) only: for scenarios about the
#                               agent, not the kernel (all.sh skips the others unstarted)
#   step MESSAGE                print a heading
#   wait_for DESC SECONDS CMD...   poll CMD until it succeeds, or fail
#   unix_listening PATH         a server listens on the Unix socket PATH
#   expect_eq DESC EXPECTED ACTUAL
#   expect_fail DESC CMD...     CMD must fail; its output is kept in $EXPECT_OUTPUT
#   expect_fail_with PATTERN DESC CMD...   ... and its output must match PATTERN
#   start_agent [ARGS...]       blkagent on $AGENT_SOCKET with state in $AGENT_STATE_DIR
#   stop_agent                  SIGTERM, wait for a clean exit (status 0)
#   kill_agent                  SIGKILL, wait until it is gone
#   ctl ARGS...                 blkctl --socket $AGENT_SOCKET ARGS...
#   volume_device ID            the volume's device path (from get-volume -o json)
#   fio_write_pattern DEV [SIZE] / fio_check_pattern DEV [SIZE] / fio_verify DEV [SIZE]
#   nvme_namespace LBS          a /dev/nvmeXnY whose logical block size is LBS
set -euo pipefail

if [[ -z "${BLK_VM_OUT:-}" ]]; then
  echo "lib.sh: not in the test VM (BLK_VM_OUT unset); run through tests/vm/run-scenarios.sh" >&2
  exit 2
fi

scenario_name="${BLK_SCENARIO:-$(basename "$0" .sh)}"
LOG_DIR="${BLK_SCENARIO_OUT:-$BLK_VM_OUT/scenarios/$scenario_name}"
mkdir -p "$LOG_DIR"
WORK="$(mktemp -d "/tmp/blk-$scenario_name.XXXXXX")"

AGENT_SOCKET="$WORK/blkagent.sock"
AGENT_STATE_DIR="$WORK/agent-state"
AGENT_PID=""
EXPECT_OUTPUT=""

step() { echo "--- [${SECONDS}s] $*"; }

fail() {
  fail_reported=1
  echo "FAIL: $*" >&2
  exit 1
}

# A scenario that set -e ends (a command failing outside a check) says which command, so the
# summary names it rather than nothing. set -E: the trap also fires inside functions.
fail_reported=0
last_error=""
set -E
trap 'last_error="line $LINENO: $BASH_COMMAND (status $?)"' ERR

# Exit status 77 (automake's "skipped"): all.sh reports SKIP.
skip() {
  echo "SKIP: $*"
  exit 77
}

# Scenarios whose subject is the agent (API validation, authorization, state files, the CSI
# plugin, metric names), not the kernel, run on one kernel: on the other they would repeat what
# it showed. Each names its kernel so that both VMs finish at about the same time (the VM phase
# is most of CI's time). all.sh reads this line and does not even start the scenario elsewhere.
one_kernel_only() { # newest|lts WHY
  [[ "$1" == newest || "$1" == lts ]] || fail "one_kernel_only: newest or lts, not '$1'"
  [[ -z "${BLK_VM_KERNEL:-}" || "$BLK_VM_KERNEL" == "$1" ]] ||
    skip "${*:2} (kernel-independent: runs on the $1 kernel only)"
}

cleanups=()
on_exit() {
  local quoted
  printf -v quoted '%q ' "$@"
  cleanups+=("$quoted")
}

# shellcheck disable=SC2317 # called by the EXIT trap
run_cleanups() {
  local status=$? i
  set +e
  if ((status != 0 && status != 77 && !fail_reported)); then
    echo "FAIL: exited with status $status; the command that failed: ${last_error:-unknown}" >&2
  fi
  for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do
    eval "${cleanups[i]}" || echo "cleanup failed: ${cleanups[i]}" >&2
  done
  if [[ -n "$AGENT_PID" ]]; then
    echo "cleanup: stopping blkagent (pid $AGENT_PID)" >&2
    kill -TERM "$AGENT_PID" 2>/dev/null
    wait_gone "$AGENT_PID" 20 || kill -KILL "$AGENT_PID" 2>/dev/null
    wait "$AGENT_PID" 2>/dev/null
  fi
  cd /
  rm -rf "$WORK"
  exit "$status"
}
trap run_cleanups EXIT

# Succeeds once PID has exited (a child that exited but is not yet reaped is
# a zombie, which kill -0 still reaches). A zombie is gone only once every thread has: a killed
# process whose leader exited while another thread is stuck in the kernel still holds its fds.
process_gone() {
  local stat tasks
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  stat="${stat##*) }"
  [[ "${stat%% *}" == Z ]] || return 1
  tasks=("/proc/$1/task"/*)
  ((${#tasks[@]} <= 1))
}

# dump_kernel_stacks PID: where each of PID's threads waits in the kernel, and every blocked task
# (sysrq w), for a process that does not exit.
dump_kernel_stacks() {
  local task
  for task in "/proc/$1/task"/*; do
    echo "--- $(cat "$task/comm" 2>/dev/null) (tid ${task##*/}, state $(awk '{print $3}' "$task/stat" 2>/dev/null))"
    cat "$task/stack" 2>/dev/null
  done
  echo w >/proc/sysrq-trigger 2>/dev/null && dmesg | tail -n 300
}

# wait_gone PID SECONDS: polls until PID has exited; fails at the deadline.
wait_gone() {
  local pid="$1" deadline=$((SECONDS + $2))
  until process_gone "$pid"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# Succeeds once a process listens on the Unix socket PATH: the file appears at bind(), before
# listen(), and a connect in between is refused.
unix_listening() { [[ -n "$(ss -Hx state listening src "$1" 2>/dev/null)" ]]; }

wait_for() {
  local desc="$1" seconds="$2"
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after ${seconds}s waiting for $desc"
    sleep 0.1
  done
}

expect_eq() {
  local desc="$1" expected="$2" actual="$3"
  [[ "$expected" == "$actual" ]] || fail "$desc: expected '$expected', got '$actual'"
  echo "ok: $desc = '$actual'"
}

expect_fail() {
  local desc="$1"
  shift
  if EXPECT_OUTPUT="$("$@" 2>&1)"; then
    echo "$EXPECT_OUTPUT" >&2
    fail "$desc: '$*' succeeded but should have failed"
  fi
  echo "ok: $desc (failed as expected: $(head -n1 <<<"$EXPECT_OUTPUT"))"
}

expect_fail_with() {
  local pattern="$1" desc="$2"
  shift 2
  expect_fail "$desc" "$@"
  grep -qE -- "$pattern" <<<"$EXPECT_OUTPUT" ||
    fail "$desc: the error does not match /$pattern/: $EXPECT_OUTPUT"
}

# --- the agent ---

start_agent() {
  [[ -z "$AGENT_PID" ]] || fail "start_agent: blkagent is already running (pid $AGENT_PID)"
  command -v blkagent >/dev/null || fail "blkagent not found in PATH ($PATH)"
  mkdir -p "$AGENT_STATE_DIR"
  rm -f "$AGENT_SOCKET"
  echo "=== start $(date +%T.%N) blkagent $*" >>"$LOG_DIR/blkagent.log"
  blkagent --socket "$AGENT_SOCKET" --state-dir "$AGENT_STATE_DIR" "$@" >>"$LOG_DIR/blkagent.log" 2>&1 &
  AGENT_PID=$!
  local deadline=$((SECONDS + 60))
  until [[ -S "$AGENT_SOCKET" ]]; do
    if process_gone "$AGENT_PID"; then
      local status=0
      wait "$AGENT_PID" || status=$?
      AGENT_PID=""
      tail -n 20 "$LOG_DIR/blkagent.log" >&2
      fail "blkagent exited with status $status before creating $AGENT_SOCKET"
    fi
    ((SECONDS < deadline)) || fail "blkagent did not create $AGENT_SOCKET within 60s"
    sleep 0.1
  done
  # The socket appears before the agent has reconciled its volumes, and calls wait until it has:
  # one call returns when the agent serves.
  blkctl --socket "$AGENT_SOCKET" list-volumes >/dev/null ||
    fail "blkagent did not answer list-volumes after start"
  echo "blkagent running (pid $AGENT_PID, socket $AGENT_SOCKET)"
}

stop_agent() {
  [[ -n "$AGENT_PID" ]] || fail "stop_agent: blkagent is not running"
  local pid="$AGENT_PID" status=0
  kill -TERM "$pid"
  wait_gone "$pid" 30 || fail "blkagent (pid $pid) did not exit within 30s of SIGTERM"
  wait "$pid" || status=$?
  AGENT_PID=""
  ((status == 0)) || fail "blkagent exited with status $status after SIGTERM (want 0)"
  echo "blkagent stopped cleanly"
}

kill_agent() {
  [[ -n "$AGENT_PID" ]] || fail "kill_agent: blkagent is not running"
  local pid="$AGENT_PID"
  kill -KILL "$pid"
  if ! wait_gone "$pid" 30; then
    dump_kernel_stacks "$pid" >&2
    fail "blkagent (pid $pid) still there 30s after SIGKILL (kernel stacks above)"
  fi
  wait "$pid" 2>/dev/null || true
  AGENT_PID=""
  echo "blkagent killed"
}

ctl() {
  blkctl --socket "$AGENT_SOCKET" "$@"
}

# A match, not jq: jq's start-up alone takes a quarter of a second under TCG, and scenarios ask
# this often. The JSON is blkctl's (protobuf's printer: "name": "value").
volume_device() {
  local json
  json="$(ctl get-volume "$1" -o json)" || fail "get-volume $1 failed"
  [[ "$json" =~ \"devicePath\":\ \"([^\"]+)\" ]] ||
    fail "get-volume $1 has no .volume.status.devicePath: $json"
  echo "${BASH_REMATCH[1]}"
}

# queue_thread_tid DEVICE_NUMBER QUEUE: the task id of the agent's thread named
# blkq<device>-<queue>.
queue_thread_tid() {
  local name="blkq$1-$2" task comm
  for task in /proc/"$AGENT_PID"/task/*; do
    # read, not $(cat): a process per thread costs a tenth of a second under TCG.
    read -r comm <"$task/comm" 2>/dev/null || continue
    if [[ "$comm" == "$name" ]]; then
      echo "${task##*/}"
      return 0
    fi
  done
  fail "no thread named $name in blkagent (pid $AGENT_PID)"
}

# --- data checks ---

fio_engine=""
# io_uring where the kernel and fio allow it, else libaio.
pick_fio_engine() {
  [[ -z "$fio_engine" ]] || return 0
  if fio --name=probe --filename="$WORK/fio-probe" --size=4k --bs=4k --rw=read \
    --ioengine=io_uring --output=/dev/null >/dev/null 2>&1; then
    fio_engine=io_uring
  else
    fio_engine=libaio
  fi
  rm -f "$WORK/fio-probe"
}

# run_fio LOGNAME ARGS...: fio with its output in LOG_DIR; shown on failure.
run_fio() {
  local log="$LOG_DIR/$1"
  shift
  if ! fio "$@" >"$log" 2>&1; then
    cat "$log" >&2
    return 1
  fi
}

# Fills pattern_args: one job whose writes carry crc32c checksums. The same
# arguments with --verify_only replay its random sequence and check it.
pattern_args=()
set_pattern_args() {
  local dev="$1" size="$2"
  pick_fio_engine
  pattern_args=(--name=pattern --filename="$dev" --direct=1 --ioengine="$fio_engine"
    --rw=randwrite --bs=4k --iodepth=16 --size="$size" --randrepeat=1
    --verify=crc32c --verify_fatal=1)
}

# Writes a checksummed pattern over the first SIZE bytes of DEV (default 64M),
# reading each block back right after the run.
fio_write_pattern() {
  local dev="$1" size="${2:-64M}"
  set_pattern_args "$dev" "$size"
  run_fio "fio-write-$(basename "$dev").log" "${pattern_args[@]}" --do_verify=1 ||
    fail "fio wrote or read back wrong data on $dev"
  echo "ok: fio wrote and verified $size on $dev ($fio_engine)"
}

# Verify-only pass: a new fio process reads what fio_write_pattern wrote and
# checks every block, e.g. after the agent restarted.
fio_check_pattern() {
  local dev="$1" size="${2:-64M}"
  set_pattern_args "$dev" "$size"
  run_fio "fio-check-$(basename "$dev").log" "${pattern_args[@]}" --verify_only=1 ||
    fail "the data on $dev does not match the pattern written before"
  echo "ok: fio verify-only pass on $dev"
}

fio_verify() {
  fio_write_pattern "$@"
  fio_check_pattern "$@"
}

nvme_namespace() {
  local lbs="$1" queue
  for queue in /sys/block/nvme*n*/queue/logical_block_size; do
    [[ -r "$queue" ]] || continue
    if [[ "$(cat "$queue")" == "$lbs" ]]; then
      queue="${queue%/queue/logical_block_size}"
      echo "/dev/${queue##*/}"
      return 0
    fi
  done
  fail "no NVMe namespace with a $lbs-byte logical block size"
}
