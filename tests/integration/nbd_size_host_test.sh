#!/usr/bin/env bash
# NBD volumes created without --size, through the real blkagent and blkctl on a host without
# ublk: the agent asks a real nbdkit for the export's size before provisioning; an unreachable
# server, or an export too small for one block, is refused with a clear error naming the URI and
# leaves nothing persisted.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/host_test_lib.sh"
bin="$1"
socket="$work/run/agent.sock"
state="$work/state"

blkctl() { "$bin/blkctl" --socket "$socket" "$@"; }

# Runs blkctl expecting failure; checks stderr contains every given text.
expect_refusal() {
  local name="$1"; shift
  local -a texts=()
  while [[ "$1" != "--" ]]; do texts+=("$1"); shift; done
  shift
  local err rc=0
  err="$(blkctl "$@" 2>&1 >/dev/null)" || rc=$?
  if ((rc == 0)); then fail "$name: succeeded"; return; fi
  for t in "${texts[@]}"; do
    if [[ "$err" != *"$t"* ]]; then fail "$name: stderr lacks '$t': $err"; return; fi
  done
  pass "$name"
}

start_nbdkit() {  # start_nbdkit SOCKET SIZE: a memory export of SIZE bytes
  nbdkit --foreground --unix "$1" memory "size=$2" >>"$work/nbdkit.log" 2>&1 &
  started+=($!)
  wait_for 30 test -S "$1" || { fail "nbdkit on $1 did not start"; exit 1; }
}

nothing_persisted() {
  [[ "$(blkctl list-volumes -o json | jq '.volumes | length')" == 0 && -z "$(ls -A "$state/volumes")" ]]
}

"$bin/blkagent" --socket "$socket" --state-dir "$state" >"$work/agent.log" 2>&1 &
agent_pid=$!
wait_for 30 test -S "$socket" || { cat "$work/agent.log"; fail "agent listens"; exit 1; }

rc=0
err="$(blkctl create-volume n0 --backend null:// 2>&1)" || rc=$?
((rc == 2)) && [[ "$err" == *"--size: is required for null:// and file:// backends"* ]] &&
  pass "--size still required for null://" || fail "null:// without --size: rc=$rc $err"

unreachable="nbd+unix:///?socket=$work/nobody.sock"
expect_refusal "unreachable server is UNAVAILABLE naming the URI" UNAVAILABLE "$unreachable" -- \
  create-volume r0 --backend "$unreachable"
nothing_persisted && pass "unreachable server: nothing persisted" ||
  fail "unreachable server: something persisted"

start_nbdkit "$work/tiny.sock" 511
tiny="nbd+unix:///?socket=$work/tiny.sock"
expect_refusal "export below one block is INVALID_ARGUMENT naming the URI" INVALID_ARGUMENT \
  "$tiny" "511 bytes" -- create-volume r1 --backend "$tiny"
nothing_persisted && pass "tiny export: nothing persisted" || fail "tiny export: something persisted"

# An export of 1 MiB + 100 bytes: the agent learns its size and rounds it down to whole blocks.
# Without ublk the create then fails at the device, which must leave nothing behind either.
start_nbdkit "$work/odd.sock" $((1048576 + 100))
odd="nbd+unix:///?socket=$work/odd.sock"
if [[ ! -e /dev/ublk-control ]]; then
  expect_refusal "after the probe, no ublk on this host" "/dev/ublk-control" -- \
    create-volume r2 --backend "$odd" --block-size 4096
  grep -q "NBD export $odd has 1048676 bytes, not a multiple of the logical block size 4096; the volume uses the first 1048576 bytes" \
    "$work/agent.log" && pass "unaligned export size rounded down and logged" ||
    fail "no rounding line in the agent log"
  nothing_persisted && pass "failed device: nothing persisted" || fail "failed device: something persisted"
fi

kill -TERM "$agent_pid"
rc=0
wait "$agent_pid" || rc=$?
agent_pid=""
((rc == 0)) && pass "SIGTERM exits 0" || fail "SIGTERM exit code $rc"

if ((failures > 0)); then
  echo "--- agent log"; cat "$work/agent.log"
  echo "--- nbdkit log"; cat "$work/nbdkit.log"
  exit 1
fi
