#!/usr/bin/env bash
# The agent killed with -9 three times while fio writes and verifies (crc32c) a
# file volume and a 2-queue NBD volume (nbdkit in the guest, without
# multi-conn: the queues share one connection) and an NVMe volume (zero copy
# where the kernel has it), with an idle null volume beside them: every restart recovers the devices (user recovery), fio sees no
# error, the data verifies, and the devices keep their numbers.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NBDKIT_PID=""

# The scenario's writers, by volume name: pid, number of runs, and "DEVICE SIZE RATE".
declare -A writer_pid writer_runs writer_args

start_writer() {
  writer_args[$1]="$2 $3 $4"
  writer_runs[$1]=0
  launch_writer "$1"
}

launch_writer() {
  local name="$1" dev size rate
  read -r dev size rate <<<"${writer_args[$name]}"
  writer_runs[$name]=$((writer_runs[$name] + 1))
  fio --name=pattern --filename="$dev" --direct=1 --ioengine="$fio_engine" --rw=randwrite \
    --bs=4k --iodepth=16 --size="$size" --randrepeat=1 --verify=crc32c --verify_fatal=1 \
    --verify_backlog=1024 --do_verify=1 --rate="$rate" \
    >"$LOG_DIR/fio-kill9-$name.${writer_runs[$name]}.log" 2>&1 &
  writer_pid[$name]=$!
  on_exit kill "$!"
}

# Waits for the writer's current run and fails unless it ended without an error.
check_writer_run() {
  local name="$1" status=0 log="$LOG_DIR/fio-kill9-$1.${writer_runs[$1]}.log"
  wait "${writer_pid[$name]}" || status=$?
  if ((status != 0)); then
    cat "$log" >&2
    fail "fio on $name exited with status $status across the kills; see $log"
  fi
  grep -qE "err= *0" "$log" || fail "fio on $name reported errors; see $log"
}

keep_writer_running() {
  process_gone "${writer_pid[$1]}" || return 0
  check_writer_run "$1"
  launch_writer "$1"
}

main() {
  command -v nbdkit >/dev/null || fail "nbdkit not found in the guest"
  nbdkit -f -U "$WORK/nbd.sock" --filter=multi-conn memory 64M multi-conn-mode=disable \
    >>"$LOG_DIR/nbdkit.log" 2>&1 &
  NBDKIT_PID=$!
  on_exit kill "$NBDKIT_PID"
  wait_for "nbdkit on $WORK/nbd.sock" 30 unix_listening "$WORK/nbd.sock"

  start_agent --on-exit delete
  ctl create-volume crashy --size 64M --queues 2 --backend "file://$WORK/crashy.img"
  ctl create-volume remote --size 32M --queues 2 --backend "nbd+unix:///?socket=$WORK/nbd.sock"
  ctl create-volume idle --size 64M --backend null://
  local nvme_ng
  nvme_ng="$(nvme_namespace 512)"
  nvme_ng="/dev/ng${nvme_ng#/dev/nvme}"
  ctl create-volume fast --size 32M --backend "nvme://$nvme_ng"
  local dev remote_dev idle_dev fast_dev
  fast_dev="$(volume_device fast)"
  dev="$(volume_device crashy)"
  remote_dev="$(volume_device remote)"
  idle_dev="$(volume_device idle)"
  pick_fio_engine

  # Rate-limited writers whose backlog verifies blocks while the agent is being killed; a
  # writer that finishes before the kills are done (a fast machine, slow restarts) is
  # checked and started again. Every run writes the same pattern, so the verify-only passes at
  # the end check what all of them wrote.
  step "fio on $dev, $remote_dev and $fast_dev, killing the agent under it"
  # About a minute each: the three kill rounds take 10-40 s, and a writer that ends early starts
  # over (32M took 3 minutes per kernel for nothing more).
  start_writer crashy "$dev" 12M 192k
  start_writer remote "$remote_dev" 6M 96k
  start_writer fast "$fast_dev" 6M 96k

  # Each restart must bring every volume back live on the device it had.
  local volumes="crashy=$dev LIVE,fast=$fast_dev LIVE,idle=$idle_dev LIVE,remote=$remote_dev LIVE"
  expect_eq "volumes before the kills" "$volumes" "$(volume_states)"
  local kill writes name
  for kill in 1 2 3; do
    for name in crashy remote fast; do keep_writer_running "$name"; done
    writes="$(writes_done "$dev")"
    wait_for "writes to flow on $dev (round $kill)" 60 \
      writes_beyond_or_gone "$dev" $((writes + 64)) "${writer_pid[crashy]}"
    step "kill -9 number $kill"
    kill_agent
    if ((kill == 1)); then
      # From here on the record says 1 queue where the kernel's device has 2: recovery must
      # run the kernel's geometry (storage and queues alike) and only report the spec's.
      set_recorded_queues remote 1
    fi
    start_agent --on-exit delete
    expect_eq "volumes live on their devices after kill $kill" "$volumes" "$(volume_states)"
  done

  grep -c "remote: ublk device [0-9]* recovered with the kernel's geometry.*queues 2 (asked 1)" \
    "$LOG_DIR/blkagent.log" >/dev/null ||
    fail "no warning that remote was recovered with 2 queues where its record says 1"
  echo "ok: remote recovered with the kernel's 2 queues where its record says 1"

  step "fio finishes without errors"
  for name in crashy remote fast; do
    check_writer_run "$name"
    echo "ok: fio on $name wrote and verified across 3 kills (${writer_runs[$name]} run(s))"
  done
  echo "copy mode of the NVMe volume: $(ctl get-volume fast -o json | jq -r .volume.status.copyMode)"
  fio_check_pattern "$fast_dev" 6M
  fio_check_pattern "$remote_dev" 6M
  fio_check_pattern "$dev" 12M
  expect_eq "idle reads zeroes" 0 "$(head -c 1M "$idle_dev" | tr -d '\0' | wc -c)"

  ctl delete-volume crashy
  ctl delete-volume remote
  ctl delete-volume idle
  ctl delete-volume fast
  stop_agent
}

# set_recorded_queues VOLUME N: the volume's persisted record says N queues from now on (its
# checksum recomputed: FNV-1a 64 of the JSON after the header line), as a hand edit or an agent
# with another default could leave it.
set_recorded_queues() {
  local record="$AGENT_STATE_DIR/volumes/$1.json" hash byte
  tail -n +2 "$record" | sed -E "s/\"queues\": *[0-9]+/\"queues\": $2/" >"$record.body"
  grep -c "\"queues\": $2" "$record.body" >/dev/null || fail "no queues field in $record"
  hash=$((0xcbf29ce484222325))
  for byte in $(od -An -v -tu1 "$record.body"); do
    hash=$(((hash ^ byte) * 0x100000001b3))
  done
  { head -n1 "$record" | sed -E "s/fnv1a64=[0-9a-f]+/fnv1a64=$(printf %016x "$hash")/"
    cat "$record.body"; } >"$record.new"
  mv "$record.new" "$record"
  rm -f "$record.body"
  echo "record of $1 now says queues $2: $(head -n1 "$record")"
}

# Writes completed on DEV, from /sys/block/NAME/stat (field 5).
writes_done() {
  local stat
  read -ra stat <"/sys/block/${1#/dev/}/stat"
  echo "${stat[4]}"
}

# writes_beyond_or_gone DEV COUNT FIO_PID: DEV completed COUNT writes, or fio ended.
writes_beyond_or_gone() {
  (($(writes_done "$1") >= $2)) || process_gone "$3"
}

# Every volume as ID=DEVICE STATE, by id, in one call (each blkctl costs a second under TCG).
volume_states() {
  ctl list-volumes -o json | jq -r '[.volumes[] | "\(.id)=\(.status.devicePath) " +
    (.status.state | sub("^VOLUME_STATE_"; ""))] | sort | join(",")'
}

main "$@"
