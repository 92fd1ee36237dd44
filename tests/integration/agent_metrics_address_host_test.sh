#!/usr/bin/env bash
# /metrics listens on loopback unless told otherwise: an agent started without --metrics-address
# serves 127.0.0.1:9477 and nothing else, so the node's other addresses do not answer; an explicit
# --metrics-address 0.0.0.0:9477 does answer on them (the check above can see the difference).
#
# The default port is fixed, and another agent on this host (a developer's, a test's) may hold
# it: the test runs in a network namespace of its own (unshare --net, root), whose loopback also
# carries a documentation address (192.0.2.1) standing in for the node's external one.
#
# agent_metrics_address_host_test.sh BIN_DIR
set -euo pipefail
bin="$1"

if [[ -z "${BLK_IN_OWN_NETNS:-}" ]]; then
  if ! unshare --net true 2>/dev/null; then
    echo "SKIP: cannot make a network namespace (unshare --net needs root or CAP_SYS_ADMIN)"
    exit 77
  fi
  exec unshare --net env BLK_IN_OWN_NETNS=1 "$0" "$@"
fi
# Only now: the scratch directory and its clean-up belong to the process that stays.
source "$(dirname "${BASH_SOURCE[0]}")/host_test_lib.sh"

ip link set lo up
ip addr add 192.0.2.1/32 dev lo

# start_agent NAME [FLAGS...]: returns once the socket exists; /metrics is bound before it.
start_agent() {
  local name="$1"
  shift
  "$bin/blkagent" --socket "$work/$name.sock" --state-dir "$work/$name-state" \
    --bpf-locality off "$@" >"$work/$name.log" 2>&1 &
  agent_pid=$!
  if ! wait_for 30 test -S "$work/$name.sock"; then
    cat "$work/$name.log"
    fail "$name: agent did not start"
    exit 1
  fi
}

stop_agent() {
  kill -TERM "$agent_pid"
  wait "$agent_pid" || fail "agent exited with status $? on SIGTERM"
  agent_pid=""
}

# The TCP sockets listening on port 9477, as /proc/net/tcp shows them: "ADDRESS:PORT" in hex
# (127.0.0.1:9477 is 0100007F:2505), state 0A.
listeners_9477() {
  awk -v port=":$(printf %04X 9477)" '$4 == "0A" && substr($2, length($2) - 4) == port { print $2 }' \
    /proc/net/tcp /proc/net/tcp6
}

start_agent default
grep -q "metrics on http://127.0.0.1:9477/metrics" "$work/default.log" &&
  pass "the agent says it serves http://127.0.0.1:9477/metrics" ||
  fail "log: $(grep -i metrics "$work/default.log")"
scrape="$(curl -fsS http://127.0.0.1:9477/metrics 2>&1)" &&
  grep -q '^blk_agent_build_info{' <<<"$scrape" &&
  pass "default: 127.0.0.1:9477 serves /metrics" || fail "default: 127.0.0.1:9477: $scrape"
listening="$(listeners_9477)"
[[ "$listening" == 0100007F:2505 ]] && pass "default: the only listener on 9477 is 127.0.0.1" ||
  fail "default: listeners on 9477: '$listening' (want 0100007F:2505 alone)"
if out="$(curl -sS --max-time 10 http://192.0.2.1:9477/metrics 2>&1)"; then
  fail "default: the node's other address answers /metrics"
else
  pass "default: the node's other address does not answer ($out)"
fi
stop_agent

start_agent everywhere --metrics-address 0.0.0.0:9477
scrape="$(curl -fsS --max-time 10 http://192.0.2.1:9477/metrics 2>&1)" &&
  grep -q '^blk_agent_build_info{' <<<"$scrape" &&
  pass "--metrics-address 0.0.0.0:9477: the node's other address answers" ||
  fail "--metrics-address 0.0.0.0:9477: 192.0.2.1:9477: $scrape"
stop_agent

((failures == 0))
