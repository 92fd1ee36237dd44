#!/usr/bin/env bash
# The BPF completion-locality probe on the host: the agent reports whether it
# runs (GetNodeInfo, blk_node_bpf_locality_available) and why not, keeps
# serving where BPF cannot load, honours --bpf-locality off, and refuses a bad
# --watch-block-devices name. Counting itself is proven in the VM
# (tests/vm/scenarios/78-kernel-completion-locality.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/host_test_lib.sh"
bin="$1"

# start NAME [WRAPPER...] -- AGENT_ARGS...: an agent with its own socket and state.
start() {
  local name="$1"; shift
  local -a wrapper=()
  while [[ "$1" != "--" ]]; do wrapper+=("$1"); shift; done
  shift
  socket="$work/$name.sock"
  log="$work/$name.log"
  "${wrapper[@]}" "$bin/blkagent" --socket "$socket" --state-dir "$work/$name-state" \
    --metrics-address 127.0.0.1:0 "$@" >"$log" 2>&1 &
  agent_pid=$!
  if ! wait_for 30 test -S "$socket"; then
    cat "$log"
    fail "$name: agent listens"
    exit 1
  fi
  metrics_url="$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$log" | head -n1)"
}

stop() {
  kill -TERM "$agent_pid"
  local rc=0
  wait "$agent_pid" || rc=$?
  agent_pid=""
  ((rc == 0)) || fail "agent exit status $rc after SIGTERM"
}

node_info() { "$bin/blkctl" --socket "$socket" node-info -o json; }
scrape() { curl -fsS "$metrics_url"; }
metric() { scrape | awk -v m="$1" '$1 == m { print $2 }'; }

# check_reports NAME: GetNodeInfo, the CLI and the metric agree, with a reason when off.
check_reports() {
  local name="$1" info available message
  info="$(node_info)"
  available="$(jq -r '.bpfLocalityAvailable // false' <<<"$info")"
  message="$(jq -r '.bpfLocalityMessage // ""' <<<"$info")"
  [[ -n "$message" ]] && pass "$name: node-info says '$message'" || fail "$name: no message: $info"
  local want=0
  [[ "$available" == true ]] && want=1
  [[ "$(metric blk_node_bpf_locality_available)" == "$want" ]] &&
    pass "$name: blk_node_bpf_locality_available $want" ||
    fail "$name: metric $(metric blk_node_bpf_locality_available), node-info available=$available"
  "$bin/blkctl" --socket "$socket" node-info | grep -q "^bpf locality: .*$message" &&
    pass "$name: blkctl node-info shows it" || fail "$name: blkctl node-info: $("$bin/blkctl" --socket "$socket" node-info)"
  [[ "$("$bin/blkctl" --socket "$socket" list-volumes -o json | jq '.volumes | length')" == 0 ]] &&
    pass "$name: the agent serves" || fail "$name: list-volumes"
  BPF_AVAILABLE="$available" BPF_MESSAGE="$message"
}

# A block device of this host to watch, if any.
host_device=""
for dev in /sys/block/*/dev; do
  [[ -r "$dev" ]] && host_device="$(basename "$(dirname "$dev")")" && break
done

start default -- ${host_device:+--watch-block-devices "$host_device"}
check_reports default
if [[ "$BPF_AVAILABLE" == true ]]; then
  if [[ -n "$host_device" ]]; then
    n="$(scrape | grep -c "^blk_block_completions_total{device=\"/dev/$host_device\",volume=\"\",locality=\"\(same_cpu\|same_hctx_group\|other\)\"}")"
    [[ "$n" == 3 ]] && pass "default: three locality series for watched /dev/$host_device" ||
      fail "default: $n series for /dev/$host_device: $(scrape | grep blk_block_completions)"
  fi
else
  grep -qE "not allowed|no BTF|cannot load|cannot attach" <<<"$BPF_MESSAGE" &&
    pass "default: unavailable with a reason" || fail "default: unclear reason '$BPF_MESSAGE'"
  grep -q "completion locality unavailable, running without it" "$log" &&
    pass "default: the log says why" || fail "default: nothing in the log"
fi
stop

start off -- --bpf-locality off
check_reports off
[[ "$BPF_AVAILABLE" == false && "$BPF_MESSAGE" == "disabled by --bpf-locality off" ]] &&
  pass "--bpf-locality off: not loaded" || fail "--bpf-locality off: $BPF_AVAILABLE '$BPF_MESSAGE'"
stop

if ((EUID == 0)); then
  # Root without the capabilities BPF needs: the probe cannot load, the agent runs on.
  start nocaps setpriv --bounding-set -bpf,-sys_admin,-perfmon -- --watch-block-devices nullb0
  check_reports nocaps
  [[ "$BPF_AVAILABLE" == false ]] && grep -q "BPF is not allowed here" <<<"$BPF_MESSAGE" &&
    pass "without CAP_BPF: unavailable, says why" || fail "without CAP_BPF: $BPF_AVAILABLE '$BPF_MESSAGE'"
  scrape | grep -q '^blk_block_completions_total{' &&
    fail "without CAP_BPF: completion series exported" || pass "without CAP_BPF: no completion series"
  stop
fi

rc=0
"$bin/blkagent" --socket "$work/bad.sock" --state-dir "$work/bad-state" --metrics-address off \
  --watch-block-devices nullb0,/tmp/x >"$work/bad.log" 2>&1 || rc=$?
((rc != 0)) && grep -q "'/tmp/x' is not a block device name" "$work/bad.log" && [[ ! -e "$work/bad.sock" ]] &&
  pass "a bad --watch-block-devices name is refused" || fail "bad watch name: rc=$rc $(cat "$work/bad.log")"
rc=0
"$bin/blkagent" --socket "$work/bad.sock" --state-dir "$work/bad-state" --metrics-address off \
  --bpf-locality maybe >"$work/bad.log" 2>&1 || rc=$?
((rc != 0)) && grep -q "bpf-locality" "$work/bad.log" && [[ ! -e "$work/bad.sock" ]] &&
  pass "a bad --bpf-locality value is refused" || fail "bad --bpf-locality: rc=$rc $(cat "$work/bad.log")"

((failures == 0)) || { echo "$failures failed"; exit 1; }
echo "all passed"
