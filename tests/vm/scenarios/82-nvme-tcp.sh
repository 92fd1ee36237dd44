#!/usr/bin/env bash
# NVMe/TCP volumes (nvme-tcp://) against the kernel's own target (nvmet) in the guest: one
# subsystem on a 256M file, exposed on 127.0.0.1:4420 and :4421; the agent connects a controller
# per path and serves the namespace's multipath head. Proves: a volume through both paths takes
# the namespace's size and shows 2/2 live paths; fio verify sees no error while one path, then
# the other, goes down and comes back (the volume shows 1/2 paths, in get-volume and /metrics,
# and counts the failovers), nor while both are down for less than io_timeout; both down past
# io_timeout fail I/O with EIO in about io_timeout instead of hanging, the agent still answers
# (0/2 paths), and the volume serves again once the paths return, without a restart; the agent
# killed (-9) under fio and restarted loses nothing and connects no second set of controllers;
# delete disconnects the controllers the agent made and leaves one connected by hand alone;
# an unknown subsystem, a port where nothing listens, an absent namespace and a size beyond the
# namespace are refused with the reason, leaving no controller behind; a subsystem that demands
# DH-CHAP serves a volume given the key in a file.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/nvmet_lib.sh"
one_kernel_only lts "fabric connects and path failover are the agent's over the kernel's nvme host; 80 covers passthrough on both kernels"

NQN=nqn.2024-01.io.blk.test:vm82
IO_TIMEOUT=8
URI="nvme-tcp://127.0.0.1:4420/$NQN?nsid=1&path=127.0.0.1:4421&io_timeout=$IO_TIMEOUT"
METRICS=http://127.0.0.1:9477/metrics

scrape() { curl -fsS "$METRICS"; }
# metric 'NAME{LABELS}': its value in a fresh scrape (empty when absent).
metric() { scrape | awk -v m="$1" '$1 == m { print $2 }'; }
metric_is() { [[ "$(metric "$1")" == "$2" ]]; }

# field KEY: the value of "KEY:" in blkctl get-volume's text on stdin.
field() { sed -n "s/^$1:[[:space:]]*//p"; }
# volume_field VOLUME KEY: the value of "KEY:" in blkctl get-volume VOLUME.
volume_field() { ctl get-volume "$1" | field "$2"; }
paths_are() { [[ "$(volume_field "$1" paths)" == "$2 live" ]]; }

live_controllers_are() { [[ "$(nvme_live_controller_count "$NQN")" == "$1" ]]; }

# wait_controllers COUNT SECONDS DESC: until our subsystem has COUNT host controllers; the
# failure names those it has.
wait_controllers() {
  local deadline=$((SECONDS + $2))
  until nvme_controller_count_is "$NQN" "$1"; do
    ((SECONDS < deadline)) ||
      fail "timed out after $2s waiting for $3: controllers of $NQN: $(nvme_controller_states "$NQN")"
    sleep 0.1
  done
}

writes_done() {
  local stat
  read -ra stat <"/sys/block/${1#/dev/}/stat"
  echo "${stat[4]}"
}

# --- a writer: fio write+verify runs of the same crc32c pattern (lib.sh's), one after the other,
# until stop_writer; the first run with an error ends it. Any run's data passes fio_check_pattern.
WRITER_PID=""
WRITER_DEV=""
start_writer() {
  WRITER_DEV="$1"
  rm -f "$WORK/stop-writer"
  set_pattern_args "$1" "$2"
  local args=("${pattern_args[@]}" --do_verify=1 --verify_backlog=256)
  (
    run=0
    while [[ ! -e "$WORK/stop-writer" ]]; do
      run=$((run + 1))
      log="$LOG_DIR/fio-writer.$run.log"
      echo "$log" >"$WORK/writer-log"
      fio "${args[@]}" >"$log" 2>&1 || exit 1
      grep -qE "err= *0" "$log" || exit 1
    done
  ) &
  WRITER_PID=$!
  on_exit kill_writer
}

kill_writer() {
  [[ -n "$WRITER_PID" ]] || return 0
  touch "$WORK/stop-writer"
  pkill -P "$WRITER_PID" 2>/dev/null
  kill "$WRITER_PID" 2>/dev/null
  return 0
}

writer_failed() {
  local log
  log="$(cat "$WORK/writer-log")"
  cat "$log" >&2
  fail "fio on $WRITER_DEV: $1 (see $log)"
}

# Fails the scenario when the writer ended (with an error: only stop_writer ends it otherwise).
writer_running() { process_gone "$WRITER_PID" && writer_failed "a run failed"; return 0; }

# writes_beyond DEV COUNT: DEV completed COUNT writes; fails the scenario if the writer died.
writes_beyond() {
  writer_running
  (($(writes_done "$1") >= $2))
}

# Waits for 256 more writes (1 MiB) to complete on the writer's device.
writes_flow() {
  local writes
  writes="$(writes_done "$WRITER_DEV")"
  wait_for "1 MiB more written to $WRITER_DEV ($1)" 60 writes_beyond "$WRITER_DEV" $((writes + 256))
}

stop_writer() {
  touch "$WORK/stop-writer"
  wait_gone "$WRITER_PID" 120 || fail "fio on $WRITER_DEV still runs 120s after it was told to stop"
  local status=0
  wait "$WRITER_PID" || status=$?
  ((status == 0)) || writer_failed "a run exited with an error"
  WRITER_PID=""
  echo "ok: fio wrote and verified on $WRITER_DEV without an error ($(cat "$WORK/writer-log") last)"
}

# refused PATTERN DESC CREATE_ARGS...: create-volume is refused with a message matching PATTERN
# and leaves no controller of our subsystem (nor of any other it named).
refused() {
  local pattern="$1" desc="$2"
  shift 2
  expect_fail_with "$pattern" "$desc" ctl create-volume bad "$@"
  wait_controllers 0 10 "no controller left after: $desc"
}

main() {
  nvmet_load
  nvmet_subsystem "$NQN" "$WORK/target.img" 256M
  nvmet_port 1 4420
  nvmet_port 2 4421
  start_agent --metrics-address 127.0.0.1:9477

  step "refused: unknown subsystem, no listener, absent namespace, too large; no controller left"
  local absent=nqn.2024-01.io.blk.test:absent
  refused "subsystem '?nqn\.2024-01\.io\.blk\.test:absent" "an unknown subsystem NQN" \
    --backend "nvme-tcp://127.0.0.1:4420/$absent?nsid=1&io_timeout=$IO_TIMEOUT"
  expect_eq "controllers of $absent" 0 "$(nvme_controller_count "$absent")"
  refused "127\.0\.0\.1:4430.*Connection refused" "a port where nothing listens" \
    --backend "nvme-tcp://127.0.0.1:4430/$NQN?nsid=1&io_timeout=$IO_TIMEOUT"
  refused "(namespace|nsid) 9([^0-9]|$)" "namespace 9, which the subsystem lacks" \
    --backend "nvme-tcp://127.0.0.1:4420/$NQN?nsid=9&path=127.0.0.1:4421&io_timeout=$IO_TIMEOUT"
  refused "INVALID_ARGUMENT.*volume\.size_bytes.*do not fit" "512M on the 256M namespace" \
    --size 512M --backend "$URI"
  expect_eq "volumes after the refusals" 0 "$(ctl list-volumes -o json | jq '.volumes | length')"

  step "a volume through both paths"
  ctl create-volume v --backend "$URI"
  local dev json
  dev="$(volume_device v)"
  wait_for "get-volume v to show 2/2 paths" 10 paths_are v 2/2
  ctl get-volume v | tee "$LOG_DIR/get-volume-v.txt"
  expect_eq "get-volume v: failovers" 0 "$(field failovers <"$LOG_DIR/get-volume-v.txt")"
  expect_eq "get-volume v: backend" "$URI" "$(field backend <"$LOG_DIR/get-volume-v.txt")"
  expect_eq "v's size (the namespace's)" $((256 << 20)) "$(blockdev --getsize64 "$dev")"
  expect_eq "controllers of $NQN" 2 "$(nvme_controller_count "$NQN")"
  json="$(ctl get-volume v -o json)"
  expect_eq "v's head device" "$(nvme_head_chardev "$NQN" 1)" "$(jq -r .volume.nvme.path <<<"$json")"
  expect_eq "paths the agent connected for v" "127.0.0.1:4420,127.0.0.1:4421" \
    "$(jq -r '.volume.nvme.fabric.agentConnectedPaths // [] | sort | join(",")' <<<"$json")"
  expect_eq "blk_volume_nvme_paths of v" 2 "$(metric 'blk_volume_nvme_paths{volume="v"}')"
  wait_for "blk_volume_nvme_paths_live of v to be 2" 10 \
    metric_is 'blk_volume_nvme_paths_live{volume="v"}' 2

  step "fio verify while port 4420, then port 4421, goes down and comes back"
  start_writer "$dev" 16M
  writes_flow "before the first path goes"
  nvmet_unlink 1
  wait_for "the controller on :4420 to leave live" 30 live_controllers_are 1
  wait_for "blk_volume_nvme_paths_live of v to drop to 1" 30 \
    metric_is 'blk_volume_nvme_paths_live{volume="v"}' 1
  writes_flow "through :4421 alone"
  nvmet_link 1
  wait_for "both controllers live again" 30 live_controllers_are 2
  wait_for "get-volume v to show 2/2 paths" 30 paths_are v 2/2
  writes_flow "after :4420 came back"
  nvmet_unlink 2
  wait_for "the controller on :4421 to leave live" 30 live_controllers_are 1
  wait_for "get-volume v to show 1/2 paths" 30 paths_are v 1/2
  writes_flow "through :4420 alone"
  nvmet_link 2
  wait_for "both controllers live again" 30 live_controllers_are 2
  wait_for "get-volume v to show 2/2 paths" 30 paths_are v 2/2
  writes_flow "after :4421 came back"

  # Unlinked for about 3 s (the host notices within a second); the controllers reconnect within
  # the agent's reconnect_delay (2 s) after: about 6 s without a path under TCG (measured with the
  # kernel's own multipath), 2 s short of io_timeout.
  step "both ports down for about 3 s, less than io_timeout ($IO_TIMEOUT s), under fio"
  local down_at relinked_at
  down_at=$SECONDS
  nvmet_unlink 1
  nvmet_unlink 2
  wait_for "both controllers to leave live" 30 live_controllers_are 0
  sleep 2 # the outage itself, not a synchronisation
  nvmet_link 1
  nvmet_link 2
  relinked_at=$SECONDS
  wait_for "both controllers live again" 30 live_controllers_are 2
  echo "both ports were unlinked for about $((relinked_at - down_at))s, the paths down for about $((SECONDS - down_at))s"
  writes_flow "after both paths came back"
  stop_writer
  local failovers
  failovers="$(volume_field v failovers)"
  if [[ ! "$failovers" =~ ^[0-9]+$ ]] || ((failovers < 1)); then
    fail "get-volume v shows failovers '$failovers' after three path losses under fio"
  fi
  echo "ok: get-volume v shows $failovers failovers"
  local counted
  counted="$(metric 'blk_volume_nvme_failovers_total{volume="v"}')"
  [[ -n "$counted" ]] || fail "/metrics has no blk_volume_nvme_failovers_total{volume=\"v\"}"
  ((counted >= 1)) || fail "blk_volume_nvme_failovers_total of v is $counted after three path losses"
  echo "ok: blk_volume_nvme_failovers_total of v is $counted"

  step "both ports down past io_timeout: EIO in about $IO_TIMEOUT s, no hang, the agent answers"
  nvmet_unlink 1
  nvmet_unlink 2
  wait_for "both controllers to leave live" 30 live_controllers_are 0
  local started=$SECONDS elapsed
  expect_fail_with "Input/output error" "a read with no path" \
    timeout 60 dd if="$dev" of=/dev/null bs=4k count=1 skip=7000 iflag=direct status=none
  elapsed=$((SECONDS - started))
  echo "the read failed after ${elapsed}s (io_timeout ${IO_TIMEOUT}s)"
  ((elapsed <= IO_TIMEOUT + 10)) || fail "EIO took ${elapsed}s with io_timeout ${IO_TIMEOUT}s"
  timeout 20 blkctl --socket "$AGENT_SOCKET" get-volume v >"$LOG_DIR/get-volume-v-down.txt" ||
    fail "get-volume v did not answer within 20s while the paths are down"
  cat "$LOG_DIR/get-volume-v-down.txt"
  wait_for "get-volume v to show 0/2 paths" 30 paths_are v 0/2
  wait_for "blk_volume_nvme_paths_live of v to be 0" 30 \
    metric_is 'blk_volume_nvme_paths_live{volume="v"}' 0

  step "the paths come back: v serves again, without a restart"
  local agent_pid="$AGENT_PID"
  nvmet_link 1
  nvmet_link 2
  wait_for "both controllers live again" 30 live_controllers_are 2
  wait_for "v to serve reads again" 30 \
    dd if="$dev" of=/dev/null bs=4k count=1 skip=7000 iflag=direct status=none
  wait_for "get-volume v to show 2/2 paths" 30 paths_are v 2/2
  expect_eq "the agent's pid" "$agent_pid" "$AGENT_PID"
  fio_check_pattern "$dev" 16M

  step "agent killed (-9) under fio and restarted: no error, no second set of controllers"
  start_writer "$dev" 16M
  writes_flow "before the kill"
  kill_agent
  expect_eq "controllers of $NQN while no agent runs" 2 "$(nvme_controller_count "$NQN")"
  start_agent --metrics-address 127.0.0.1:9477
  writes_flow "after the restart"
  expect_eq "controllers of $NQN after the restart" 2 "$(nvme_controller_count "$NQN")"
  wait_for "get-volume v to show 2/2 paths after the restart" 30 paths_are v 2/2
  expect_eq "v's device after the restart" "$dev" "$(volume_device v)"
  stop_writer
  fio_check_pattern "$dev" 16M
  expect_eq "controllers of $NQN after fio" 2 "$(nvme_controller_count "$NQN")"

  step "delete disconnects the agent's controllers"
  ctl delete-volume v
  wait_controllers 0 30 "the agent's controllers to go"

  step "a controller connected by hand is left alone"
  nvme connect -t tcp -a 127.0.0.1 -s 4420 -n "$NQN" >"$LOG_DIR/nvme-connect.log" 2>&1 || {
    cat "$LOG_DIR/nvme-connect.log" >&2
    fail "nvme connect to 127.0.0.1:4420 failed"
  }
  local hand
  hand="$(nvme_host_controllers "$NQN")"
  expect_eq "controllers after nvme connect" 1 "$(nvme_controller_count "$NQN")"
  ctl create-volume w --size 64M --backend "$URI"
  expect_eq "controllers with w (the hand-made one reused)" 2 "$(nvme_controller_count "$NQN")"
  expect_eq "paths the agent connected for w" "127.0.0.1:4421" \
    "$(ctl get-volume w -o json | jq -r '.volume.nvme.fabric.agentConnectedPaths // [] | join(",")')"
  fio_verify "$(volume_device w)" 8M
  ctl delete-volume w
  wait_controllers 1 30 "w's controller (on :4421) to go"
  expect_eq "the controller left" "$hand" "$(nvme_host_controllers "$NQN")"
  expect_eq "its state" live "$(cat "/sys/class/nvme/$hand/state")"
  echo "ok: $hand (connected by hand) is still there and live"

  # A wrong key is not tried here: 7.3's refusal took from under a second to beyond blkctl's
  # deadline in two runs (the kernel's authentication timeout), too slow for the suite.
  step "DH-CHAP: the key from a file is accepted"
  local secure=nqn.2024-01.io.blk.test:vm82-auth host key
  host="$(cat /etc/nvme/hostnqn)"
  key="$(nvme gen-dhchap-key -n "$host" -m 0)" || fail "nvme gen-dhchap-key failed"
  nvmet_subsystem "$secure" "$WORK/auth.img" 64M
  nvmet_require_host "$secure" "$host" "$key"
  nvmet_port 3 4422 "$secure"
  (umask 077 && echo "$key" >"$WORK/dhchap.key")
  ctl create-volume a --backend "nvme-tcp://127.0.0.1:4422/$secure?nsid=1&dhchap_secret_file=$WORK/dhchap.key"
  fio_verify "$(volume_device a)" 8M
  ctl delete-volume a
  wait_for "a's controller to go" 30 nvme_controller_count_is "$secure" 0

  expect_eq "volumes left" 0 "$(ctl list-volumes -o json | jq '.volumes | length')"
  stop_agent
}

main "$@"
