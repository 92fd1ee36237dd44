#!/usr/bin/env bash
# rq_affinity and queue-thread placement on a real kernel: every rq_affinity
# value set with update-volume (and at create) reaches the device's sysfs and
# shows in get-volume and /metrics; invalid values are refused and change
# nothing; completions are reported redirected exactly when the kernel
# advertises UBLK_F_SUPPORT_RQ_AFFINITY; queue threads run where the placement
# says (node, the default; hctx, spread, a CPU list), so that fio pinned to one CPU gets remote
# completions where the thread serving it runs elsewhere; and all of it still
# holds after kill -9 and restart (device recovered) and after the devices were
# deleted and re-created.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only newest "placement and rq_affinity are the agent's (no kernel offers SUPPORT_RQ_AFFINITY yet); 70 and 78 cover both kernels"

METRICS="127.0.0.1:9477"
# Each process costs a tenth to a quarter of a second under TCG (jq and curl the most): the
# helpers below read files with the shell's read and ask jq for several fields at once.
scrape() { curl -fsS "http://$METRICS/metrics"; }
metric() { scrape | awk -v m="$1" '$1 == m { print $2 }'; }
volume_json() { ctl get-volume "$1" -o json; }
device_number() { local dev && dev="$(volume_device "$1")" && echo "${dev#/dev/ublkb}"; }

# "0-2,5" or "0, 1, 2, 5" -> "0 1 2 5"
expand_cpus() {
  local item cpu out=() list="${1// /}"
  for item in ${list//,/ }; do
    if [[ "$item" == *-* ]]; then
      for ((cpu = ${item%-*}; cpu <= ${item#*-}; cpu++)); do out+=("$cpu"); done
    else
      out+=("$item")
    fi
  done
  echo "${out[*]}"
}

# The Cpus_allowed_list of /proc/PID[/task/TID]/status.
allowed_cpus_of() {
  local key value
  while read -r key value; do
    [[ "$key" == Cpus_allowed_list: ]] && echo "$value" && return 0
  done <"$1/status"
}

# The Cpus_allowed_list of the agent's thread named blkq<device>-<queue>.
queue_thread_cpus() { allowed_cpus_of "/proc/$AGENT_PID/task/$(queue_thread_tid "$1" "$2")"; }

# expect_queue_cpus VOLUME DEVICE-NUMBER QUEUE EXPECTED-CPUS (a space-separated list)
expect_queue_cpus() {
  expect_eq "CPUs of $1's queue $3 thread (blkq$2-$3)" "$4" \
    "$(expand_cpus "$(queue_thread_cpus "$2" "$3")")"
}

# expect_rq_affinity VOLUME VALUE [ASKED]: sysfs, get-volume (and the value asked, when given)
# and /metrics all agree.
expect_rq_affinity() {
  local volume="$1" value="$2" device status asked sysfs
  IFS='|' read -r device status asked < <(volume_json "$volume" |
    jq -r '[.volume.status.devicePath, .volume.status.rqAffinity, .volume.rqAffinity] | map(tostring) | join("|")')
  read -r sysfs <"/sys/block/${device#/dev/}/queue/rq_affinity"
  expect_eq "$volume: sysfs queue/rq_affinity" "$value" "$sysfs"
  expect_eq "$volume: get-volume status.rqAffinity" "$value" "$status"
  if (($# > 2)); then
    expect_eq "$volume: get-volume rqAffinity (asked)" "$3" "$asked"
  fi
  expect_eq "$volume: blk_volume_rq_affinity" "$value" \
    "$(metric "blk_volume_rq_affinity{volume=\"$volume\"}")"
}

# The expected redirection: never without --rq-affinity-feature-bit; with
# --rq-affinity-feature-bit 21, whether the kernel advertises bit 21 (neither
# test kernel does).
expected_redirected() {
  local features
  [[ "${RQ_AFFINITY_BIT:-}" == 21 ]] || {
    echo false
    return 0
  }
  features="$(ctl node-info -o json | jq -r '.ublkFeatures // "0"')"
  if (((features >> 21) & 1)); then echo true; else echo false; fi
}

expect_redirected() {
  local volume="$1" want="$2" metric_want=0
  [[ "$want" == true ]] && metric_want=1
  expect_eq "$volume: get-volume status.rqAffinityRedirected" "$want" \
    "$(volume_json "$volume" | jq -r '.volume.status.rqAffinityRedirected // false')"
  expect_eq "$volume: blk_volume_rq_affinity_redirected" "$metric_want" \
    "$(metric "blk_volume_rq_affinity_redirected{volume=\"$volume\"}")"
}

expect_placement_info() {
  local info
  info="$(scrape | grep "^blk_volume_placement_info{.*volume=\"$1\".*} 1")" ||
    fail "no blk_volume_placement_info for $1"
  [[ "$info" == *"placement=\"$2\""* ]] ||
    fail "blk_volume_placement_info of $1 is not placement=\"$2\": $info"
  echo "ok: blk_volume_placement_info{volume=\"$1\",placement=\"$2\"}"
}

# The queue of VOLUME whose hctx serves CPU (blk-mq's map, from sysfs).
serving_queue() {
  local hctx cpus
  for hctx in "/sys/block/ublkb$(device_number "$1")/mq/"*; do
    read -r cpus <"$hctx/cpu_list"
    if [[ ",${cpus// /}," == *",$2,"* ]]; then
      echo "${hctx##*/}"
      return 0
    fi
  done
  fail "no hctx of $1 lists CPU $2"
}

completions() { metric "blk_queue_completions_total{volume=\"$1\",queue=\"$2\",locality=\"$3\"}"; }
inflight_is_zero() { [[ "$(metric "blk_volume_inflight_ios{volume=\"$1\"}")" == 0 ]]; }

# expect_completions VOLUME CPU LOCALITY: fio pinned to CPU reads from VOLUME;
# the queue serving CPU counts all of fio's I/Os (within 1%) as LOCALITY and
# none as the other.
expect_completions() {
  local volume="$1" cpu="$2" locality="$3" other=local queue
  [[ "$locality" == local ]] && other=remote
  queue="$(serving_queue "$volume" "$cpu")"
  wait_for "$volume to be idle" 30 inflight_is_zero "$volume"
  local counted0 other0
  counted0="$(completions "$volume" "$queue" "$locality")"
  other0="$(completions "$volume" "$queue" "$other")"
  [[ -n "$counted0" && -n "$other0" ]] || fail "no blk_queue_completions_total for $volume queue $queue"
  pick_fio_engine
  taskset -c "$cpu" fio --name=pinned --filename="$(volume_device "$volume")" --rw=randread \
    --bs=4k --size=16M --iodepth=16 --ioengine="$fio_engine" --direct=1 \
    --output-format=json --output="$LOG_DIR/fio-$volume-cpu$cpu.json" >/dev/null 2>&1 ||
    fail "fio pinned to CPU $cpu on $volume failed"
  wait_for "$volume to be idle after fio" 30 inflight_is_zero "$volume"
  local ios counted
  ios="$(jq '.jobs[0].read.total_ios' "$LOG_DIR/fio-$volume-cpu$cpu.json")"
  counted=$(($(completions "$volume" "$queue" "$locality") - counted0))
  local diff=$((counted - ios))
  ((diff < 0)) && diff=$((-diff))
  ((ios > 0 && diff * 100 <= ios)) ||
    fail "$volume queue $queue: $counted $locality completions for fio's $ios reads from CPU $cpu"
  echo "ok: $volume queue $queue (serving CPU $cpu): $counted $locality completions for fio's $ios reads"
  expect_eq "$volume queue $queue: new $other completions" 0 \
    $(($(completions "$volume" "$queue" "$other") - other0))
}

# Everything checked after each restart.
check_volumes() {
  local when="$1"
  step "volumes after $when"
  expect_rq_affinity upd 2
  expect_rq_affinity one 1
  local spr_id lst_id
  spr_id="$(device_number spr)"
  lst_id="$(device_number lst)"
  expect_queue_cpus spr "$spr_id" 0 "${allowed[0]}"
  expect_queue_cpus spr "$spr_id" 1 "${allowed[1 % ${#allowed[@]}]}"
  expect_queue_cpus lst "$lst_id" 0 "$last_cpu"
  expect_queue_cpus lst "$lst_id" 1 "$last_cpu"
  expect_placement_info spr spread
  expect_placement_info lst "$last_cpu"
  expect_node_placement nod
}

# The VM has one NUMA node: --placement node is then every CPU the agent may use.
expect_node_placement() {
  local devid q
  devid="$(device_number "$1")"
  for q in 0 1; do
    expect_queue_cpus "$1" "$devid" "$q" "${allowed[*]}"
  done
  expect_placement_info "$1" node
}

main() {
  start_agent --on-exit delete --metrics-address "$METRICS"
  local -a allowed
  read -r -a allowed <<<"$(expand_cpus "$(allowed_cpus_of "/proc/$AGENT_PID")")"
  echo "the agent may use CPUs ${allowed[*]}"
  local last_cpu="${allowed[-1]}"

  step "rq_affinity 0, 1, 2 set with update-volume"
  ctl create-volume upd --size 16M --backend null://
  expect_eq "upd: no rq_affinity asked" null "$(volume_json upd | jq -r '.volume.rqAffinity')"
  local value
  for value in 0 1 2 0 2; do
    ctl update-volume upd --rq-affinity "$value" >/dev/null
    expect_rq_affinity upd "$value" "$value"
  done

  step "create with --rq-affinity 1"
  ctl create-volume one --size 16M --backend null:// --rq-affinity 1 >/dev/null
  expect_rq_affinity one 1

  step "invalid values are refused and change nothing"
  expect_fail_with "INVALID_ARGUMENT: volume.rq_affinity: 3 is not 0, 1 or 2" "update to 3" \
    ctl update-volume upd --rq-affinity 3
  expect_rq_affinity upd 2
  expect_fail_with "INVALID_ARGUMENT: volume.rq_affinity: 7" "create with 7" \
    ctl create-volume bad --size 16M --backend null:// --rq-affinity 7
  expect_fail_with "NOT_FOUND" "update of an unknown volume" \
    ctl update-volume nosuch --rq-affinity 1
  expect_fail_with "INVALID_ARGUMENT: volume.placement: CPU 1000 is not one this agent may use" \
    "placement on a CPU the agent may not use" \
    ctl create-volume bad --size 16M --backend null:// --placement "0,1000"
  expect_fail_with "INVALID_ARGUMENT: volume.placement: 'everywhere'" "unknown placement" \
    ctl create-volume bad --size 16M --backend null:// --placement everywhere
  expect_eq "volumes after the refusals" "one,upd" \
    "$(ctl list-volumes -o json | jq -r '[.volumes[].id] | join(",")')"
  # Creating an existing volume again with another rq_affinity is the same volume.
  ctl create-volume one --size 16M --backend null:// --rq-affinity 2 >/dev/null
  expect_rq_affinity one 1

  step "completion redirection matches the kernel's GET_FEATURES"
  local redirected
  redirected="$(expected_redirected)"
  echo "the kernel advertises SUPPORT_RQ_AFFINITY: $redirected"
  expect_redirected upd "$redirected"
  expect_redirected one "$redirected"

  step "placement: hctx pins each queue thread to its hctx CPUs"
  ctl create-volume hct --size 16M --backend null:// --queues 2 --placement hctx >/dev/null
  local devid q hctx_cpus
  devid="$(device_number hct)"
  for q in 0 1; do
    read -r hctx_cpus <"/sys/block/ublkb$devid/mq/$q/cpu_list"
    expect_queue_cpus hct "$devid" "$q" "$(expand_cpus "$hctx_cpus")"
  done
  expect_placement_info hct hctx

  step "placement: spread puts queue i on the i-th allowed CPU"
  ctl create-volume spr --size 16M --backend "file://$WORK/spr.img" --queues 2 \
    --placement spread >/dev/null
  devid="$(device_number spr)"
  expect_queue_cpus spr "$devid" 0 "${allowed[0]}"
  expect_queue_cpus spr "$devid" 1 "${allowed[1 % ${#allowed[@]}]}"
  fio_verify "$(volume_device spr)" 8M

  step "placement: an explicit list"
  ctl create-volume lst --size 16M --backend null:// --queues 2 --placement "$last_cpu" >/dev/null
  expect_eq "lst: placement in get-volume" "$last_cpu" \
    "$(volume_json lst | jq -r '.volume.placement')"

  step "placement: node (the default) lets each queue thread run on the allowed CPUs of its hctx CPUs' NUMA nodes"
  [[ ! -e /sys/devices/system/node/node1 ]] || fail "more than one NUMA node: this step assumes one"
  ctl create-volume nod --size 16M --backend null:// --queues 2 >/dev/null
  expect_eq "nod: placement in get-volume" node "$(volume_json nod | jq -r '.volume.placement')"
  # Placement is set at creation: creating the volume again with another one is the same volume.
  ctl create-volume nod --size 16M --backend null:// --queues 2 --placement hctx >/dev/null
  expect_eq "nod: placement after a create asking for hctx" node \
    "$(volume_json nod | jq -r '.volume.placement')"
  check_volumes "creating them"

  step "completion locality: fio pinned to one CPU, queue threads placed elsewhere count remote"
  # A CPU whose serving queue spread puts on another CPU; none when the
  # kernel's hctx map is the identity (6.12), where spread is hctx.
  local cpu spread_cpu=""
  for cpu in "${allowed[@]}"; do
    q="$(serving_queue spr "$cpu")"
    if [[ "$(expand_cpus "$(queue_thread_cpus "$(device_number spr)" "$q")")" != "$cpu" ]]; then
      spread_cpu="$cpu"
    fi
  done
  if [[ -n "$spread_cpu" ]]; then
    expect_completions spr "$spread_cpu" remote
  else
    echo "spread puts every queue thread on its hctx CPU on this kernel: completions stay local"
    expect_completions spr "${allowed[0]}" local
  fi
  # lst runs both queue threads on the last CPU: reads from the first are remote everywhere.
  ((${#allowed[@]} > 1)) || fail "this check needs two CPUs, the agent may use ${allowed[*]}"
  expect_completions lst "${allowed[0]}" remote

  step "kill -9 with rq_affinity changed behind the agent's back: the restarted agent re-applies it"
  local upd_dev
  upd_dev="$(volume_device upd)"
  kill_agent
  echo 0 >"/sys/block/$(basename "$upd_dev")/queue/rq_affinity"
  start_agent --on-exit delete --metrics-address "$METRICS"
  check_volumes "kill -9 and restart (devices recovered)"
  expect_redirected upd "$redirected"

  step "--rq-affinity-feature-bit: a released flag's bit or one out of range is refused"
  stop_agent
  [[ -z "$(ls /dev/ublkc* 2>/dev/null)" ]] || fail "devices left after --on-exit delete: $(ls /dev/ublkc*)"
  expect_fail_with "is UBLK_F_USER_RECOVERY of released kernels" "feature bit 3" \
    blkagent --socket "$AGENT_SOCKET" --state-dir "$AGENT_STATE_DIR" --rq-affinity-feature-bit 3
  expect_fail_with "must be 0..63" "feature bit 64" \
    blkagent --socket "$AGENT_SOCKET" --state-dir "$AGENT_STATE_DIR" --rq-affinity-feature-bit 64

  step "devices deleted with the agent, re-created by the next one asking for bit 21"
  RQ_AFFINITY_BIT=21
  start_agent --on-exit delete --metrics-address "$METRICS" --rq-affinity-feature-bit 21
  grep -c "SUPPORT_RQ_AFFINITY taken as UBLK_F_\* bit 21" "$LOG_DIR/blkagent.log" >/dev/null ||
    fail "no start-up line about --rq-affinity-feature-bit 21 in blkagent.log"
  check_volumes "a restart that re-created the devices"
  redirected="$(expected_redirected)"
  echo "the kernel advertises bit 21: $redirected"
  expect_redirected one "$redirected"
  expect_redirected upd "$redirected"
}
main "$@"
