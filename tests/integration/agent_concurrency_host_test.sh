#!/usr/bin/env bash
# Many blkctl calls at once against the real agent, on a host without ublk: calls beyond the
# agent's workers wait their turn (none is turned away), creates of different volumes run at
# once, a caller's deadline is honoured while its call waits; the waiting-call, volume and
# message-size limits refuse clearly and change nothing; the health service says NOT_SERVING
# while the agent reconciles its volumes at start and SERVING after; --nbd-connect-timeout bounds
# the agent's dial of an export that never answers.
#
# Slow calls come from creates of NBD volumes without a size: the agent probes the export, and
# silent_listener.py accepts the connection and never answers until the test releases it (closes
# it). The agents under test wait far longer than the test ever needs (--nbd-connect-timeout
# 300), so a slow call ends when the test says, never at a timeout, however long a loaded machine
# takes to start the other clients; a short --nbd-connect-timeout is checked on its own.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/host_test_lib.sh"
bin="$1"
health_check="$2"
here="$(cd "$(dirname "$0")" && pwd)"

# start_agent NAME ARGS...: an agent on $work/NAME.sock with state in $work/NAME-state.
start_agent() {
  local name="$1"; shift
  "$bin/blkagent" --socket "$work/$name.sock" --state-dir "$work/$name-state" \
    --metrics-address off --bpf-locality off --log-level debug "$@" >"$work/$name.log" 2>&1 &
  started+=($!)
  eval "${name}_pid=$!"
  if ! wait_for 30 test -S "$work/$name.sock"; then
    cat "$work/$name.log"; fail "agent $name listens"; exit 1
  fi
}

# start_listener NAME: a silent NBD server on $work/NAME.nbd, its counters in $work/NAME.d.
start_listener() {
  mkdir "$work/$1.d"
  "$here/silent_listener.py" "$work/$1.nbd" "$work/$1.d" &
  started+=($!)
  wait_for 30 test -e "$work/$1.d/ready"
}
slow_uri() { echo "nbd+unix:///exp?socket=$work/$1.nbd"; }
connections_reach() { [[ "$(cat "$work/$1.d/$2")" -ge "$3" ]]; }  # NAME open|max_open COUNT
release() { touch "$work/$1.d/release"; }

# calls NAME AGENT ARGS...: blkctl in the background; its exit code and output in $work/calls/NAME.
mkdir "$work/calls"
background=()
call() {
  local name="$1" agent="$2"; shift 2
  ( rc=0; "$bin/blkctl" --socket "$work/$agent.sock" "$@" >"$work/calls/$name.out" 2>&1 || rc=$?
    echo "$rc" >"$work/calls/$name.rc" ) &
  background+=($!)
}
wait_calls() { for pid in "${background[@]}"; do wait "$pid" || true; done; background=(); }
rc_of() { cat "$work/calls/$1.rc"; }
out_of() { cat "$work/calls/$1.out"; }
health_is() { [[ "$("$health_check" "$work/$1.sock" 2>&1)" == "$2" ]]; }  # AGENT STATUS
waiting_logged() { [[ "$(grep -c "$2" "$work/$1.log")" -ge "$3" ]]; }  # AGENT TEXT COUNT

# Longer than this test runs (ctest's TIMEOUT): the test's release ends every slow call, and the
# calls queued behind them wait for it, not for their own deadline.
held=(--nbd-connect-timeout 300)
patient=(--timeout 280s)

# --- 32 clients at once against the defaults (4 workers)
start_listener slow
start_agent a "${held[@]}"
status="$("$health_check" "$work/a.sock" 2>&1)" || true
[[ "$status" == SERVING ]] && pass "health: SERVING once started" || fail "health once started: $status"

for i in 1 2 3 4; do
  call "slow$i" a "${patient[@]}" create-volume "slow$i" --backend "$(slow_uri slow)"
done
wait_for 60 connections_reach slow open 4 && pass "4 creates of different volumes run at once" ||
  fail "4 creates at once: at most $(cat "$work/slow.d/max_open") ran together"

for i in $(seq 1 8); do call "list$i" a "${patient[@]}" list-volumes -o json; done
for i in $(seq 1 6); do call "get$i" a "${patient[@]}" get-volume "missing$i"; done
for i in $(seq 1 6); do call "info$i" a "${patient[@]}" node-info -o json; done
for i in $(seq 1 4); do
  call "same$i" a "${patient[@]}" create-volume same --size 1M --backend null://
done
for i in $(seq 1 4); do
  call "other$i" a "${patient[@]}" create-volume "other$i" --size 1M --backend null://
done
call late a --timeout 1s create-volume late --size 1M --backend null://
# 28 quick calls and the late one queue behind the 4 slow creates, however long they take to come.
wait_for 120 waiting_logged a "waits for a worker" 29 && pass "29 calls wait for a worker" ||
  fail "calls waiting: $(grep -c "waits for a worker" "$work/a.log")"
wait "${background[-1]}"
[[ "$(rc_of late)" != 0 && "$(out_of late)" == *DEADLINE_EXCEEDED* ]] &&
  pass "a waiting call's deadline is honoured" || fail "late create: rc=$(rc_of late) $(out_of late)"
release slow
wait_calls

exhausted="$(grep -l RESOURCE_EXHAUSTED "$work"/calls/*.out || true)"
[[ -z "$exhausted" ]] && pass "no call of 34 was turned away" ||
  fail "RESOURCE_EXHAUSTED: $(cat $exhausted | head -n 3)"
ok=1
# A list that runs beside one of the queued creates (4 workers) may show that volume while it is
# being created; nothing else exists.
for i in $(seq 1 8); do
  [[ "$(rc_of "list$i")" == 0 ]] &&
    jq -e '(.volumes // []) | all(.id | test("^(same|other[1-4])$"))' "$work/calls/list$i.out" \
      >/dev/null || ok=0
done
for i in $(seq 1 6); do
  [[ "$(rc_of "get$i")" != 0 && "$(out_of "get$i")" == *"NOT_FOUND: volume 'missing$i'"* ]] || ok=0
  [[ "$(rc_of "info$i")" == 0 && "$(jq -r .kernelRelease "$work/calls/info$i.out")" == "$(uname -r)" ]] ||
    ok=0
done
((ok)) && pass "waiting lists, gets and node-infos answered" ||
  fail "waiting quick calls: $(head -n 5 "$work"/calls/{list,get,info}[1-8].out)"
ok=1
for i in 1 2 3 4; do
  [[ "$(rc_of "slow$i")" != 0 &&
    "$(out_of "slow$i")" == *"cannot learn the size of NBD export"*"closed the connection"* ]] ||
    ok=0
done
((ok)) && pass "the slow creates ended when their server let go, with the probe's own error" ||
  fail "slow create: $(out_of slow1)"
if [[ ! -e /dev/ublk-control ]]; then
  ok=1
  for name in other1 other2 other3 other4; do
    [[ "$(rc_of "$name")" != 0 && "$(out_of "$name")" == *"/dev/ublk-control"* ]] || ok=0
  done
  # Creates of one id at once: one runs, one that finds it in progress is ABORTED (CSI semantics).
  for name in same1 same2 same3 same4; do
    [[ "$(rc_of "$name")" != 0 && ("$(out_of "$name")" == *"/dev/ublk-control"* ||
      "$(out_of "$name")" == *"ABORTED: an operation on volume 'same' is already in progress"*) ]] ||
      ok=0
  done
  ((ok)) && pass "waiting creates ran (and met the host without ublk)" ||
    fail "creates: $(cat "$work"/calls/{same,other}*.out)"
fi
! grep -q "CreateVolume late:" "$work/a.log" &&
  grep -q "CreateVolume: not run: the caller's deadline passed" "$work/a.log" &&
  pass "a create whose caller gave up is not run" || fail "the late create ran: $(grep late "$work/a.log")"

# --- the waiting-call and message-size limits
start_listener slow2
start_agent b "${held[@]}" --grpc-threads 1 --max-waiting-calls 2 --max-message-size 4096
call b-slow b create-volume bslow --backend "$(slow_uri slow2)"
wait_for 60 connections_reach slow2 open 1 || fail "agent b: the slow create did not start"
call b-list1 b list-volumes
call b-list2 b list-volumes
wait_for 30 waiting_logged b "waits for a worker" 2 || fail "agent b: the calls did not wait"
rc=0
err="$("$bin/blkctl" --socket "$work/b.sock" list-volumes 2>&1)" || rc=$?
((rc != 0)) && [[ "$err" == *RESOURCE_EXHAUSTED*"--max-waiting-calls 2"* ]] &&
  pass "a full queue refuses naming --max-waiting-calls" || fail "third waiting call: rc=$rc $err"
release slow2
wait_calls
[[ "$(rc_of b-list1)" == 0 && "$(rc_of b-list2)" == 0 ]] && pass "the queued calls ran after" ||
  fail "queued calls: $(out_of b-list1) $(out_of b-list2)"

long_export="$(head -c 5000 /dev/zero | tr '\0' x)"
rc=0
err="$("$bin/blkctl" --socket "$work/b.sock" create-volume big --size 1M \
  --backend "nbd://127.0.0.1/$long_export" 2>&1)" || rc=$?
((rc != 0)) && [[ "$err" == *RESOURCE_EXHAUSTED* && "$err" == *"4096"* ]] &&
  pass "a request over --max-message-size is RESOURCE_EXHAUSTED" || fail "big request: rc=$rc $err"
[[ -z "$(ls -A "$work/b-state/volumes")" ]] && pass "the refused requests persisted nothing" ||
  fail "persisted: $(ls "$work/b-state/volumes")"

# --- start-up: NOT_SERVING while the volumes are reconciled; calls wait for it
start_listener slow3
mkdir -p "$work/c-state/volumes"
printf '{"id":"restored","sizeBytes":"1048576","nbd":{"uri":"%s"}}\n' "$(slow_uri slow3)" \
  >"$work/c-state/volumes/restored.json"
start_agent c "${held[@]}" --max-volumes 1
wait_for 30 connections_reach slow3 open 1 || fail "agent c: restore did not dial the export"
status="$("$health_check" "$work/c.sock" 2>&1)" || true
[[ "$status" == NOT_SERVING ]] && pass "health: NOT_SERVING while reconciling" ||
  fail "health while reconciling: $status"
rc=0
err="$("$bin/blkctl" --socket "$work/c.sock" --timeout 1s list-volumes 2>&1)" || rc=$?
((rc != 0)) && [[ "$err" == *DEADLINE_EXCEEDED* ]] && pass "calls wait while reconciling" ||
  fail "list while reconciling: rc=$rc $err"
call c-list c list-volumes -o json
wait_for 30 waiting_logged c "waits until the volumes are reconciled" 2 ||
  fail "agent c: the calls did not wait for the restore"
release slow3
wait_calls
[[ "$(rc_of c-list)" == 0 && "$(jq -r '.volumes[0].status.state' "$work/calls/c-list.out")" == \
  VOLUME_STATE_DEGRADED ]] && pass "a waiting list answered after reconciling" ||
  fail "list after reconciling: $(out_of c-list)"
wait_for 30 health_is c SERVING && pass "health: SERVING after" ||
  fail "health after reconciling: $("$health_check" "$work/c.sock" 2>&1)"

rc=0
err="$("$bin/blkctl" --socket "$work/c.sock" create-volume more --size 1M --backend null:// 2>&1)" ||
  rc=$?
((rc != 0)) && [[ "$err" == *RESOURCE_EXHAUSTED*"--max-volumes 1"* ]] &&
  pass "a volume over --max-volumes is refused naming it" || fail "create over the limit: rc=$rc $err"
[[ -z "$(ls "$work/c-state/volumes" | grep -v '^restored\.json')" ]] &&
  pass "the refused create persisted nothing" || fail "persisted: $(ls "$work/c-state/volumes")"

# --- --nbd-connect-timeout: a silent server fails the probe and the open of the export after it
rc=0
err="$(timeout 30 "$bin/blkagent" --socket "$work/refused.sock" \
  --state-dir "$work/refused-state" --nbd-connect-timeout 0 2>&1)" || rc=$?
((rc != 0)) && [[ "$err" == *--nbd-connect-timeout* ]] &&
  pass "--nbd-connect-timeout 0 is refused" ||
  fail "--nbd-connect-timeout 0: rc=$rc $err"
start_listener slow4
start_agent d --nbd-connect-timeout 1
# Both fail at the agent's 1 s, well within the callers' 8 s (the default 10 s would not).
call d-probe d --timeout 8s create-volume dprobe --backend "$(slow_uri slow4)"
call d-open d --timeout 8s create-volume dopen --size 1M --backend "$(slow_uri slow4)"
wait_calls
[[ "$(rc_of d-probe)" != 0 &&
  "$(out_of d-probe)" == *"cannot learn the size of NBD export"*receive* ]] &&
  pass "the size probe gives up after --nbd-connect-timeout" || fail "probe: $(out_of d-probe)"
[[ "$(rc_of d-open)" != 0 && "$(out_of d-open)" == *"$work/slow4.nbd"*receive* ]] &&
  pass "opening the export gives up after --nbd-connect-timeout" || fail "open: $(out_of d-open)"

for name in a b c d; do
  pid_var="${name}_pid"
  kill -TERM "${!pid_var}"
  rc=0
  wait "${!pid_var}" || rc=$?
  ((rc == 0)) && [[ ! -e "$work/$name.sock" ]] && pass "agent $name: SIGTERM exits 0, socket removed" ||
    fail "agent $name: exit $rc"
done

if ((failures > 0)); then
  for name in a b c d; do echo "--- agent $name log"; tail -n 40 "$work/$name.log"; done
  exit 1
fi
