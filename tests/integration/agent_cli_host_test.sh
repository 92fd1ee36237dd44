#!/usr/bin/env bash
# blkagent + blkctl on a host without ublk: the API answers, validates every
# field, refuses what it cannot do with a clear error, changes nothing on a
# rejected request, and shuts down cleanly on SIGTERM.
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

# --version: the same project version from all three binaries, and nothing started.
versions="$(for b in blkagent blkctl blk-csi; do "$bin/$b" --version; done | sort -u)"
[[ "$versions" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] && pass "--version: $versions from all three" ||
  fail "--version: '$versions'"

"$bin/blkagent" --socket "$socket" --state-dir "$state" --metrics-address 127.0.0.1:0 \
  >"$work/agent.log" 2>&1 &
agent_pid=$!
if wait_for 30 test -S "$socket"; then pass "agent listens"; else
  cat "$work/agent.log"; fail "agent listens"; exit 1
fi

metrics_url="$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$work/agent.log" | head -n1)"
scrape="$(curl -fsS "$metrics_url" 2>&1)" && pass "metrics served at $metrics_url" ||
  fail "metrics: '$metrics_url': $scrape"
grep -q '^blk_agent_build_info{version="' <<<"$scrape" && pass "metrics: build info" ||
  fail "metrics: no build info"
grep -q "^blk_node_ublk_info{.*kernel_release=\"$(uname -r)\"" <<<"$scrape" &&
  pass "metrics: node info" || fail "metrics: no node info"
grep -q '^blk_volumes{state="live"} 0' <<<"$scrape" && pass "metrics: no live volumes" ||
  fail "metrics: volume count"
grep -q '^blk_unknown_ublk_devices 0' <<<"$scrape" && pass "metrics: no unknown devices" ||
  fail "metrics: unknown devices"
lint="$(promtool check metrics <<<"$scrape" 2>&1)" && pass "promtool check metrics" ||
  fail "promtool check metrics: $lint"

rc=0
"$bin/blkagent" --socket "$work/third.sock" --state-dir "$work/state3" \
  --metrics-address "$(sed "s,^http://,,; s,/metrics$,," <<<"$metrics_url")" >"$work/third.log" 2>&1 || rc=$?
((rc != 0)) && grep -q "cannot serve metrics" "$work/third.log" && [[ ! -e "$work/third.sock" ]] &&
  pass "a metrics port in use is refused clearly" || fail "metrics port in use: rc=$rc $(cat "$work/third.log")"

[[ "$(stat -c %a "$socket")" == 660 ]] && pass "socket mode 0660" || fail "socket mode $(stat -c %a "$socket")"

info="$(blkctl node-info -o json)"
[[ "$(jq -r .kernelRelease <<<"$info")" == "$(uname -r)" ]] && pass "node-info kernel release" ||
  fail "node-info kernel release: $info"
[[ "$(jq -r .cpuCount <<<"$info")" == "$(nproc --all)" || "$(jq -r .cpuCount <<<"$info")" == "$(nproc)" ]] &&
  pass "node-info cpu count" || fail "node-info cpu count: $info"

[[ "$(blkctl list-volumes -o json | jq '.volumes | length')" == 0 ]] && pass "no volumes at start" ||
  fail "no volumes at start"

expect_refusal "bad id" INVALID_ARGUMENT volume.id -- create-volume Bad_Id --size 1M --backend null://
expect_refusal "size 0" INVALID_ARGUMENT volume.size_bytes -- create-volume v0 --size 0 --backend null://
expect_refusal "unknown scheme" "unknown backend scheme" -- create-volume v1 --size 1M --backend ftp://x/y
expect_refusal "missing directory" INVALID_ARGUMENT "does not exist" -- \
  create-volume v2 --size 1M --backend "file://$work/missing/dir/img"
expect_refusal "misaligned size" INVALID_ARGUMENT "multiple of the logical block size" -- \
  create-volume v3 --size 1000 --backend null://
expect_refusal "rq_affinity 3" INVALID_ARGUMENT "volume.rq_affinity: 3 is not 0, 1 or 2" -- \
  create-volume v5 --size 1M --backend null:// --rq-affinity 3
expect_refusal "unknown placement" INVALID_ARGUMENT "volume.placement: 'everywhere'" -- \
  create-volume v6 --size 1M --backend null:// --placement everywhere
expect_refusal "placement on a CPU the agent may not use" INVALID_ARGUMENT \
  "volume.placement: CPU 1023 is not one this agent may use" -- \
  create-volume v7 --size 1M --backend null:// --placement 0,1023
expect_refusal "update of an unknown volume" NOT_FOUND "unknown-id" -- \
  update-volume unknown-id --rq-affinity 1
expect_refusal "update to rq_affinity 3" INVALID_ARGUMENT "volume.rq_affinity: 3" -- \
  update-volume unknown-id --rq-affinity 3

if [[ ! -e /dev/ublk-control ]]; then
  expect_refusal "no ublk on this host" "/dev/ublk-control" -- \
    create-volume v4 --size 1M --backend "file://$work/img"
  [[ ! -e "$work/img" ]] && pass "failed create leaves no image file" || fail "failed create left $work/img"
fi

[[ "$(blkctl list-volumes -o json | jq '.volumes | length')" == 0 ]] && pass "rejected requests changed nothing" ||
  fail "rejected requests changed nothing"
[[ -z "$(ls -A "$state/volumes")" ]] && pass "nothing persisted" || fail "persisted: $(ls "$state/volumes")"

expect_refusal "delete of an unknown id" "NOT_FOUND: volume 'unknown-id' does not exist" -- \
  delete-volume unknown-id
out="$(blkctl delete-volume unknown-id --if-exists 2>&1)" &&
  [[ "$out" == "volume unknown-id does not exist; nothing to delete" ]] &&
  pass "delete --if-exists of an unknown id is OK, saying so" ||
  fail "delete --if-exists of an unknown id: $out"
expect_refusal "get of unknown id" NOT_FOUND -- get-volume unknown-id
expect_refusal "stats of unknown id" "NOT_FOUND: volume 'unknown-id' does not exist" -- \
  stats unknown-id --count 1
expect_refusal "stats of a bad id" INVALID_ARGUMENT "is not a valid volume id" -- stats Bad_Id --count 1

rc=0
"$bin/blkagent" --socket "$work/second.sock" --state-dir "$state" --metrics-address off \
  >"$work/second.log" 2>&1 || rc=$?
((rc != 0)) && grep -q "already running" "$work/second.log" && pass "second agent on the same state dir refused" ||
  fail "second agent: rc=$rc $(cat "$work/second.log")"

kill -TERM "$agent_pid"
rc=0
wait "$agent_pid" || rc=$?
agent_pid=""
((rc == 0)) && pass "SIGTERM exits 0" || fail "SIGTERM exit code $rc"
[[ ! -e "$socket" ]] && pass "socket removed" || fail "socket left behind"

if ((failures > 0)); then
  echo "--- agent log"; cat "$work/agent.log"
  exit 1
fi
