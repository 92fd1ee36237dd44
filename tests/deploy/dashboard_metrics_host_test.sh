#!/usr/bin/env bash
# Usage: dashboard_metrics_host_test.sh BIN_DIR SOURCE_DIR
# Every metric the dashboard and the alerts query is declared in a real scrape of the
# agent on this host (no ublk here, so families may have no series; the VM scenario
# 79-dashboard-metrics requires series).
set -euo pipefail
bin="$1" src="$2"
work="$(mktemp -d)"
pid=""
cleanup() {
  [[ -z "$pid" ]] || kill "$pid" 2>/dev/null || true
  [[ -z "$pid" ]] || wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$bin/blkagent" --socket "$work/agent.sock" --state-dir "$work/state" \
  --metrics-address 127.0.0.1:0 >"$work/agent.log" 2>&1 &
pid=$!
url=""
for _ in $(seq 300); do
  url="$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$work/agent.log" | head -n1)" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$url" ]] || {
  cat "$work/agent.log" >&2
  echo "FAIL: the agent did not report its metrics address" >&2
  exit 1
}
curl -fsS "$url" >"$work/scrape.txt"
"$src/tests/deploy/check_metrics_exported.py" --declared-only "$work/scrape.txt" \
  "$src/deploy/grafana/blk-dashboard.json" "$src/deploy/prometheus/blk-alerts.yaml"
