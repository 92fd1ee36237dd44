#!/usr/bin/env bash
# The Grafana dashboard and the alert rules (deploy/) against the real agent, with null,
# file, NBD and NVMe/TCP volumes (and null_blk, watched by the BPF probe) under fio:
# - a scrape has a series for every blk_* metric they query
#   (tests/deploy/check_metrics_exported.py lists any missing);
# - a real Prometheus scraping the agent returns data for every dashboard query
#   (tests/deploy/check_dashboard_data.py) and evaluates every alert rule without error;
# - the NBD server killed under a read makes BlkBackendErrors fire in that Prometheus.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/nvmet_lib.sh"
one_kernel_only lts "the dashboard's metric names are the agent's"

# The scenarios run from a copy; the deploy files are in the source tree of the build.
source_dir() {
  local src
  src="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "${BLK_BUILD_DIR:?}/CMakeCache.txt")"
  [[ -f "$src/deploy/grafana/blk-dashboard.json" ]] ||
    fail "no deploy/grafana/blk-dashboard.json in the build's source tree '$src'"
  echo "$src"
}

scrape() { curl -fsS "http://127.0.0.1:9477/metrics"; }

kill_quietly() { kill -KILL "$1" 2>/dev/null || true; }

PROMETHEUS=http://127.0.0.1:9090
prom_value() {
  curl -fsS "$PROMETHEUS/api/v1/query" --data-urlencode "query=$1" |
    jq -r '.data.result[0].value[1] // empty'
}
# Succeeds once Prometheus scraped the agent at least 3 s after EPOCH (1 s interval).
scraped_after() {
  local at
  at="$(prom_value 'timestamp(up{job="blkagent"} == 1)' 2>/dev/null)" || return 1
  [[ -n "$at" ]] && ((${at%.*} >= $1 + 3))
}

# Succeeds once every alert rule was evaluated; fails the scenario if one errs.
rules_evaluated() {
  local rules
  rules="$(curl -fsS "$PROMETHEUS/api/v1/rules")" || return 1
  jq -e '[.data.groups[].rules[]] | length > 0' <<<"$rules" >/dev/null ||
    fail "Prometheus loaded no alert rules: $rules"
  if jq -e '[.data.groups[].rules[] | select(.health == "err")] | length > 0' \
    <<<"$rules" >/dev/null; then
    jq -r '.data.groups[].rules[] | select(.health == "err") | "\(.name): \(.lastError)"' \
      <<<"$rules" >&2
    fail "alert rules fail to evaluate on the agent's metrics (above)"
  fi
  jq -e '[.data.groups[].rules[] | select(.health != "ok")] | length == 0' <<<"$rules" >/dev/null
}

# alert_state NAME VOLUME: the alert's state for the volume (empty when inactive).
alert_state() {
  curl -fsS "$PROMETHEUS/api/v1/alerts" | jq -r --arg name "$1" --arg volume "$2" \
    '[.data.alerts[] | select(.labels.alertname == $name and .labels.volume == $volume)
      | .state] | first // empty'
}
alert_firing() { [[ "$(alert_state "$@")" == firing ]]; }

start_prometheus() {
  local rules="$1"
  cat >"$WORK/prometheus.yml" <<CONFIG
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $rules
scrape_configs:
  - job_name: blkagent
    static_configs:
      - targets: ["127.0.0.1:9477"]
CONFIG
  prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address=127.0.0.1:9090 >>"$LOG_DIR/prometheus.log" 2>&1 &
  local pid=$!
  on_exit kill -KILL "$pid"
  wait_for "Prometheus to be ready" 60 curl -fs -o /dev/null "$PROMETHEUS/-/ready"
}

main() {
  local src
  src="$(source_dir)"
  command -v nbdkit >/dev/null || fail "nbdkit not found in the guest"
  nbdkit -f -U "$WORK/nbd.sock" memory 64M >>"$LOG_DIR/nbdkit.log" 2>&1 &
  local nbdkit_pid=$!
  on_exit kill_quietly "$nbdkit_pid"
  wait_for "nbdkit on $WORK/nbd.sock" 30 unix_listening "$WORK/nbd.sock"

  start_agent --on-exit delete --metrics-address 127.0.0.1:9477 --watch-block-devices nullb0
  start_prometheus "$src/deploy/prometheus/blk-alerts.yaml"
  # Without the BPF probe (no BTF) blk_block_completions_total has no series; said so here.
  local may_be_empty=()
  if [[ "$(ctl node-info -o json | jq -r '.bpfLocalityAvailable // false')" != true ]]; then
    [[ ! -e /sys/kernel/btf/vmlinux ]] || fail "the kernel has BTF but the BPF probe did not load"
    echo "note: no BPF completion-locality probe on $(uname -r); its panels may be empty"
    may_be_empty=(--may-be-empty blk_block_completions_total)
  fi
  step "null, file, NBD and NVMe/TCP volumes"
  nvmet_load
  nvmet_subsystem nqn.2024-01.io.blk.test:vm79 "$WORK/nvmet.img" 64M
  nvmet_port 1 4420
  truncate -s 64M "$WORK/file.img"
  ctl create-volume vnull --size 64M --backend null:// --queues 2 --iops 1000000
  ctl create-volume vfile --size 64M --backend "file://$WORK/file.img"
  ctl create-volume vnbd --size 32M --backend "nbd+unix:///?socket=$WORK/nbd.sock" \
    --io-timeout 10
  ctl create-volume vtcp --backend "nvme-tcp://127.0.0.1:4420/nqn.2024-01.io.blk.test:vm79?nsid=1"

  step "fio on each volume (reads, writes, flushes, discards) and on null_blk"
  pick_fio_engine
  local id dev
  for id in vnull vfile vnbd vtcp nullb0; do
    dev="/dev/nullb0"
    [[ "$id" == nullb0 ]] || dev="$(volume_device "$id")"
    run_fio "fio-$id.log" --name="$id" --filename="$dev" --direct=1 --ioengine="$fio_engine" \
      --rw=randrw --bs=4k --iodepth=8 --size=8M --io_size=4M --fsync=16 ||
      fail "fio on $id ($dev)"
    [[ "$id" == nullb0 ]] || blkdiscard -o 0 -l 1M "$dev" 2>>"$LOG_DIR/blkdiscard.log" ||
      echo "note: blkdiscard on $dev failed (see blkdiscard.log)"
  done
  echo "ok: fio ran on every volume"

  step "the dashboard's and the alerts' metrics are in a real scrape"
  scrape >"$LOG_DIR/scrape.txt"
  promtool check metrics <"$LOG_DIR/scrape.txt" ||
    fail "promtool check metrics rejects the scrape (see scrape.txt)"
  "$src/tests/deploy/check_metrics_exported.py" "${may_be_empty[@]}" "$LOG_DIR/scrape.txt" \
    "$src/deploy/grafana/blk-dashboard.json" "$src/deploy/prometheus/blk-alerts.yaml" ||
    fail "the dashboard or the alerts query metrics the agent does not export (above)"

  step "every dashboard query returns data from a real Prometheus"
  local now
  now="$(date +%s)"
  wait_for "Prometheus to scrape the agent after fio" 60 scraped_after "$now"
  "$src/tests/deploy/check_dashboard_data.py" "${may_be_empty[@]}" \
    --volume vnull --volume vfile --volume vnbd --volume vtcp \
    "$PROMETHEUS" "$src/deploy/grafana/blk-dashboard.json" ||
    fail "dashboard panels without data (above)"

  step "every alert rule evaluates on the agent's metrics; the NBD server killed fires one"
  wait_for "Prometheus to evaluate every alert rule" 60 rules_evaluated
  echo "ok: every alert rule evaluated without error"
  expect_eq "BlkBackendErrors for vnbd while its server runs" "" \
    "$(alert_state BlkBackendErrors vnbd)"
  # The read must be waiting when io_timeout (10 s) ends the outage to count as a timeout
  # (reads after that fail at once), so it starts right after the kill.
  local nbd_dev
  nbd_dev="$(volume_device vnbd)"
  kill -KILL "$nbdkit_pid"
  expect_fail_with "Input/output error" "a read on vnbd with its server gone" \
    timeout 60 dd if="$nbd_dev" of=/dev/null bs=4k count=1 skip=100 iflag=direct status=none
  local deadline=$((SECONDS + 60))
  until alert_firing BlkBackendErrors vnbd; do
    if ((SECONDS >= deadline)); then
      scrape | grep '^blk_volume_backend_errors_total' >&2 || true
      curl -fsS "$PROMETHEUS/api/v1/alerts" >&2 || true
      fail "BlkBackendErrors did not fire for vnbd within 60s (the agent's and Prometheus's view above)"
    fi
    sleep 0.5
  done
  curl -fsS "$PROMETHEUS/api/v1/alerts" >"$LOG_DIR/alerts.json"
  echo "ok: BlkBackendErrors fires for vnbd: $(jq -c '[.data.alerts[]
    | select(.labels.alertname == "BlkBackendErrors") | .labels]' "$LOG_DIR/alerts.json")"

  for id in vtcp vnbd vfile vnull; do ctl delete-volume "$id"; done
  stop_agent
}

main "$@"
