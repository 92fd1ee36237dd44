#!/usr/bin/env bash
# Guest script (run by tests/bench/run.sh through tests/vm/run-vm.sh):
#   guest.sh BUILD_DIR GROUP...
# Runs the comparison GROUPs (tests/bench/lib.sh bench_group: every device
# in turn, each round starting one device later) within this one boot:
#   defaults  out of the box: a fresh agent without flags and one null volume
#         of 2 queues (the README's command), against kublk's null target and
#         null_blk, nothing else alive; fio iops with 2 jobs, 4 s, no ramp
#         (unless BLK_BENCH_RUNTIME, BLK_BENCH_RAMP say otherwise). Then, where
#         the VM has an NVMe namespace, the same agent's NVMe volume of 2
#         queues against raw passthrough and the block device (defaults-nvme).
#   null  a `null` volume of 2 queues made by BUILD_DIR/bin/blkagent, the same
#         from an agent with --metrics-address off (no per-I/O statistics),
#         the same from an agent with --batch-io off (classic per-request
#         commands; "ours" uses UBLK_F_BATCH_IO where the kernel offers it),
#         the same from an agent with --io-limits off (no throttling layer:
#         what an unlimited volume pays for the limits feature),
#         the same with its queue threads on the other CPU (--placement 1,0),
#         the kernel's null_blk, kublk's null target (`kublk add -t null -q 2`)
#         and the same with -b (BATCH_IO), where this kernel's kublk has it.
#         fio: iops with 2 jobs, lat, seq.
#   placement  where the queue threads run: one agent, three null volumes of
#         2 queues (--placement hctx, node, and 1,0: each thread on the other
#         CPU), fio iops with 1, 2 and 4 jobs, then 2 jobs with every CPU
#         busy (one spinning thread pinned to each: a node whose applications
#         leave no idle CPU), which writes a second group, placement-busy;
#         and QD1 latency (placement-qd1), with NVMe volumes (hctx, node) on
#         the bench's namespace beside the null ones.
#   nvme  one NVMe namespace (4096-byte LBAs): /dev/ngXnY through fio's
#         io_uring_cmd passthrough (the ceiling), its block device, an
#         NVMe volume of 2 queues in copy and in zero-copy mode (where the
#         kernel has UBLK_F_AUTO_BUF_REG), and kublk's loop target on the
#         block device in zero copy (`kublk add -t loop -q 2 --auto_zc`, and
#         -b). fio: iops with 2 jobs, lat, seq over the first 512 MiB.
#   fabric  one NVMe/TCP namespace: the kernel's nvmet in the guest (a 512 MiB
#         tmpfs file, one port on loopback), an NVMe/TCP volume of 2 queues
#         made by the agent (it connects the controller), against fio's
#         io_uring_cmd passthrough on the namespace's multipath head (the
#         ceiling) and the head's block device. fio: iops with 2 jobs, lat, seq.
#   nbd   one nbdkit memory export on loopback TCP through the kernel's NBD
#         client (nbd-client, one connection; with the kernel's mq-deadline
#         and with scheduler none), through an NBD volume (one queue, one
#         connection; the same with --batch-io off, and with its scheduler put
#         back to mq-deadline) and
#         straight from fio's libnbd engine (a user-space client with no
#         block layer). fio: iops (1 job), lat, seq over the first 256 MiB.
# Writes $BLK_VM_OUT/groups/GROUP.json, one per group. No threshold.
#
# Environment: BLK_BENCH_RUNTIME (seconds per run, default 10),
#              BLK_BENCH_ROUNDS (rounds, default 3), BLK_BENCH_RAMP and
#              BLK_BENCH_TESTS (smoke runs, see lib.sh),
#              BLK_BENCH_KUBLK (kublk binary, from tests/bench/fetch-kublk.sh;
#              without it the null and nvme groups say kublk is not available),
#              BLK_BENCH_MODBASE (modules tree for modprobe -d: nbd.ko),
#              BLK_BENCH_PLACEMENT_JOBS (the placement group's fio job counts,
#              default "1 2 4")
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

# Everything runs inside main: bash parses a function whole before running it,
# so editing this file while it runs (the VM takes minutes) cannot derail it.
main() {
  build_dir="${1:?usage: guest.sh BUILD_DIR GROUP...}"
  shift
  build_dir="$(cd "$build_dir" && pwd)"
  export PATH="$build_dir/bin:$PATH"
  # shellcheck source=../vm/scenarios/lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/../vm/scenarios/lib.sh"
  # shellcheck source=lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

  echo "kernel $(uname -r), $(nproc) cpus; ${bench_runtime}s per fio run, $bench_rounds rounds"

  # A second agent next to lib.sh's, with its own socket and state:
  # start_extra_agent NAME ARGS... then extra_ctl NAME ARGS...; stop_extra_agent NAME.
  declare -gA extra_pids=()
  start_extra_agent() {
    local name="$1"
    shift
    mkdir -p "$WORK/$name-state"
    blkagent --socket "$WORK/$name.sock" --state-dir "$WORK/$name-state" --on-exit delete \
      --log-level warn "$@" >>"$LOG_DIR/blkagent-$name.log" 2>&1 &
    extra_pids[$name]=$!
    on_exit stop_extra_agent "$name"
    wait_for "agent $name's socket" 60 test -S "$WORK/$name.sock"
    extra_ctl "$name" list-volumes >/dev/null || fail "agent $name does not answer"
  }
  extra_ctl() {
    local name="$1"
    shift
    blkctl --socket "$WORK/$name.sock" "$@"
  }
  stop_extra_agent() {
    local pid="${extra_pids[$1]:-}"
    [[ -n "$pid" ]] || return 0
    extra_pids[$1]=""
    kill -TERM "$pid" 2>/dev/null || return 0
    wait_gone "$pid" 30 || kill -KILL "$pid"
  }
  extra_device() {
    extra_ctl "$1" get-volume "$2" -o json | jq -r .volume.status.devicePath
  }

  # kublk_add ID ARGS...: a kublk device /dev/ublkbID of 2 queues (ARGS: its target and options);
  # deleted on exit.
  kublk_add() {
    local id="$1"
    shift
    "$BLK_BENCH_KUBLK" add -q 2 -n "$id" "$@" >>"$LOG_DIR/kublk.log" 2>&1 ||
      fail "kublk add -q 2 $* failed (see $LOG_DIR/kublk.log)"
    on_exit kublk_del "$id"
    wait_for "/dev/ublkb$id" 30 test -b "/dev/ublkb$id"
  }

  # kublk --help prints its usage and exits non-zero.
  kublk_has_batch() { { "$BLK_BENCH_KUBLK" --help 2>&1 || true; } | grep -q -- --batch; }

  kublk_del() {
    [[ ! -e "/dev/ublkc$1" ]] || "$BLK_BENCH_KUBLK" del -n "$1" >>"$LOG_DIR/kublk.log" 2>&1
  }

  # start_cpu_hogs: a thread spinning on each CPU, pinned there, until stop_cpu_hogs (or exit).
  cpu_hogs=()
  start_cpu_hogs() {
    local cpu
    for ((cpu = 0; cpu < $(nproc); cpu++)); do
      taskset -c "$cpu" bash -c 'while :; do :; done' &
      cpu_hogs+=("$!")
    done
    on_exit stop_cpu_hogs
  }
  stop_cpu_hogs() {
    ((${#cpu_hogs[@]})) || return 0
    kill "${cpu_hogs[@]}"
    wait "${cpu_hogs[@]}" 2>/dev/null || true
    cpu_hogs=()
  }

  group_null() {
    [[ -b /dev/nullb0 ]] || fail "no /dev/nullb0 (null_blk not loaded)"
    start_agent --log-level warn --metrics-address 127.0.0.1:9477
    ctl create-volume bench-null --size 4G --backend null:// --queues 2 >/dev/null
    local ours off classic kublk="-" kublk_b="-" kublk_name="kublk -t null -q 2: not available"
    local kublk_b_name="kublk -t null -q 2 -b: not available"
    ours="$(volume_device bench-null)"
    # The same volume with each queue thread on the other CPU than the one whose I/O it serves
    # (with 2 CPUs and 2 queues, queue i's hctx set is CPU i): fio and the server then run side by
    # side instead of taking turns on one CPU.
    local moved="-" moved_name="ublk null volume, queue threads off their hctx CPU: needs 2 CPUs"
    if (($(nproc) == 2)); then
      ctl create-volume bench-moved --size 4G --backend null:// --queues 2 --placement 1,0 >/dev/null
      moved="$(volume_device bench-moved)"
      moved_name="ublk null volume, --placement 1,0 (queue threads off their hctx CPU)"
    fi
    start_extra_agent off --metrics-address off
    extra_ctl off create-volume bench-off --size 4G --backend null:// --queues 2 >/dev/null
    off="$(extra_device off bench-off)"
    # Its own metrics port: statistics on, like ours, so the two differ only in the I/O commands.
    start_extra_agent classic --metrics-address 127.0.0.1:9478 --batch-io off
    extra_ctl classic create-volume bench-classic --size 4G --backend null:// --queues 2 >/dev/null
    classic="$(extra_device classic bench-classic)"
    # Without the throttling layer: what a volume without limits pays for the feature.
    start_extra_agent nolimits --metrics-address 127.0.0.1:9483 --io-limits off
    extra_ctl nolimits create-volume bench-nolimits --size 4G --backend null:// --queues 2 >/dev/null
    local nolimits
    nolimits="$(extra_device nolimits bench-nolimits)"
    expect_fail_with "FAILED_PRECONDITION.*--io-limits off" "the nolimits agent refuses limits" \
      extra_ctl nolimits create-volume bench-limited --size 1G --backend null:// --iops 1000
    local ours_mode
    ours_mode="$(ctl get-volume bench-null -o json | jq -r .volume.status.ioMode)"
    [[ "$(extra_ctl classic get-volume bench-classic -o json | jq -r .volume.status.ioMode)" == classic ]] ||
      fail "bench-classic is not in classic io mode"
    expect_fail_with "FAILED_PRECONDITION.*--metrics-address off" "the off agent keeps no statistics" \
      extra_ctl off stats bench-off --count 1
    if [[ -x "${BLK_BENCH_KUBLK:-}" ]]; then
      kublk_add 100 -t null
      kublk=/dev/ublkb100 kublk_name="kublk -t null -q 2"
      if kublk_has_batch; then
        kublk_add 101 -t null -b
        kublk_b=/dev/ublkb101 kublk_b_name="kublk -t null -q 2 -b (batch)"
      else
        kublk_b_name="kublk -t null -q 2 -b: not supported by this kernel's kublk"
      fi
    fi
    echo "null_blk: queue_mode=$(cat /sys/module/null_blk/parameters/queue_mode)" \
      "submit_queues=$(cat /sys/module/null_blk/parameters/submit_queues)" \
      "irqmode=$(cat /sys/module/null_blk/parameters/irqmode); ours: $ours ($ours_mode)," \
      "off: $off, classic: $classic"
    bench_group null "null devices, 2 queues" "iops lat seq" "--numjobs=2" \
      "ours|ublk null volume (blkagent)|$ours||http://127.0.0.1:9477/metrics bench-null" \
      "moved|$moved_name|$moved||http://127.0.0.1:9477/metrics bench-moved" \
      "off|ublk null volume, --metrics-address off|$off|" \
      "classic|ublk null volume, --batch-io off (classic)|$classic||http://127.0.0.1:9478/metrics bench-classic" \
      "nolimits|ublk null volume, --io-limits off (no throttling layer)|$nolimits||http://127.0.0.1:9483/metrics bench-nolimits" \
      "kublk|$kublk_name|$kublk|" \
      "kublk_b|$kublk_b_name|$kublk_b|" \
      "null_blk|null_blk /dev/nullb0|/dev/nullb0|"
    bench_ratio null "null volume / kublk null" ours kublk
    bench_ratio null "null volume / kublk -b null" ours kublk_b
    bench_ratio null "null volume, threads off their hctx CPU / kublk null" moved kublk
    bench_ratio null "null volume, threads off their hctx CPU / the default (node)" moved ours
    bench_ratio null "null volume / null_blk" ours null_blk
    bench_ratio null "metrics on / off (null volume)" ours off
    bench_ratio null "io mode $ours_mode / classic (null volume)" ours classic
    bench_ratio null "throttling layer, no limits / --io-limits off (null volume)" ours nolimits
    # The statistics were really counted: every read of ours is in its counter.
    local counted
    counted="$(curl -fsS http://127.0.0.1:9477/metrics |
      awk '$1 == "blk_volume_ios_total{volume=\"bench-null\",op=\"read\"}" { print $2 }')"
    ((counted > 0)) || fail "the agent counted no reads of bench-null"
    [[ "$kublk" == - ]] || kublk_del 100
    [[ "$kublk_b" == - ]] || kublk_del 101
    extra_ctl off delete-volume bench-off >/dev/null
    stop_extra_agent off
    extra_ctl classic delete-volume bench-classic >/dev/null
    stop_extra_agent classic
    extra_ctl nolimits delete-volume bench-nolimits >/dev/null
    stop_extra_agent nolimits
    ctl delete-volume bench-null >/dev/null
    [[ "$moved" == - ]] || ctl delete-volume bench-moved >/dev/null
    stop_agent >/dev/null
  }

  # What a new user measures, and the README's headline: a fresh agent with no flags at all, one
  # volume made as the README makes it, kublk's null target and null_blk, nothing else alive;
  # fio 4k randread QD32, 2 jobs, rounds of 4 s without warm-up unless BLK_BENCH_RUNTIME and
  # BLK_BENCH_RAMP say otherwise (docs/benchmarks.md).
  group_defaults() {
    [[ -b /dev/nullb0 ]] || fail "no /dev/nullb0 (null_blk not loaded)"
    local bench_runtime="${BLK_BENCH_RUNTIME:-4}" bench_ramp="${BLK_BENCH_RAMP:-0}"
    local kublk="-" kublk_name="kublk -t null -q 2: not available"
    start_agent
    ctl create-volume pn --size 4G --queues 2 --backend null:// >/dev/null
    if [[ -x "${BLK_BENCH_KUBLK:-}" ]]; then
      kublk_add 100 -t null
      kublk=/dev/ublkb100 kublk_name="kublk -t null -q 2"
    fi
    bench_group defaults "out of the box: a fresh agent's null volume, 2 queues" "iops" \
      "--numjobs=2" \
      "ours|ublk null volume, the agent's defaults|$(volume_device pn)|" \
      "kublk|$kublk_name|$kublk|" \
      "null_blk|null_blk /dev/nullb0|/dev/nullb0|"
    bench_ratio defaults "null volume, defaults / kublk null (out of the box)" ours kublk
    bench_ratio defaults "null volume, defaults / null_blk (out of the box)" ours null_blk
    [[ "$kublk" == - ]] || kublk_del 100
    ctl delete-volume pn >/dev/null
    # The same for an NVMe volume, where the VM has the bench's namespace (run.sh gives it one when
    # the group runs): the agent's defaults against the namespace itself, the whole of it.
    local blk
    if blk="$(nvme_namespace 4096 2>/dev/null)"; then
      local ng="/dev/ng${blk#/dev/nvme}"
      ctl create-volume pv --queues 2 --backend "nvme://$ng" >/dev/null
      bench_group defaults-nvme "out of the box: the same agent's NVMe volume, 2 queues" "iops" \
        "--numjobs=2" \
        "ours|NVMe volume, the agent's defaults ($(ctl get-volume pv -o json |
          jq -r .volume.status.copyMode))|$(volume_device pv)|" \
        "raw|NVMe passthrough $ng (fio io_uring_cmd)|$ng|--ioengine=io_uring_cmd --cmd_type=nvme --direct=0" \
        "block|block device $blk|$blk|"
      bench_ratio defaults-nvme "NVMe volume, defaults / raw passthrough (out of the box)" ours raw
      bench_ratio defaults-nvme "NVMe volume, defaults / block device (out of the box)" ours block
      ctl delete-volume pv >/dev/null
    fi
    stop_agent >/dev/null
  }

  # Which --placement serves best, by how many threads submit and whether any CPU is idle
  # (docs/benchmarks.md, "Where the queue threads run").
  group_placement() {
    start_agent --log-level warn --metrics-address 127.0.0.1:9477
    local placement placements=(hctx node) metrics=http://127.0.0.1:9477/metrics
    (($(nproc) != 2)) || placements+=("1,0")
    for placement in "${placements[@]}"; do
      ctl create-volume "pl-${placement/,/-}" --size 4G --backend null:// --queues 2 \
        --placement "$placement" >/dev/null
    done
    local hctx node moved="-"
    hctx="$(volume_device pl-hctx)" node="$(volume_device pl-node)"
    (($(nproc) != 2)) || moved="$(volume_device pl-1-0)"
    local devices=() jobs job_counts
    read -ra job_counts <<<"${BLK_BENCH_PLACEMENT_JOBS:-1 2 4}"
    for jobs in "${job_counts[@]}"; do
      devices+=("hctx$jobs|--placement hctx, $jobs fio jobs|$hctx|--numjobs=$jobs|$metrics pl-hctx"
        "node$jobs|--placement node, $jobs fio jobs|$node|--numjobs=$jobs|$metrics pl-node"
        "moved$jobs|--placement 1,0, $jobs fio jobs|$moved|--numjobs=$jobs|$metrics pl-1-0")
    done
    bench_group placement "null volumes of 2 queues, by placement and fio jobs" "iops" "" "${devices[@]}"
    for jobs in "${job_counts[@]}"; do
      bench_ratio placement "node / hctx, $jobs fio jobs" "node$jobs" "hctx$jobs"
      bench_ratio placement "1,0 / hctx, $jobs fio jobs" "moved$jobs" "hctx$jobs"
    done
    start_cpu_hogs
    bench_group placement-busy "the same with one spinning thread pinned to every CPU" "iops" \
      "--numjobs=2" \
      "hctx|--placement hctx, 2 fio jobs, CPUs busy|$hctx||$metrics pl-hctx" \
      "node|--placement node, 2 fio jobs, CPUs busy|$node||$metrics pl-node" \
      "moved|--placement 1,0, 2 fio jobs, CPUs busy|$moved||$metrics pl-1-0"
    stop_cpu_hogs
    bench_ratio placement-busy "node / hctx, CPUs busy" node hctx
    bench_ratio placement-busy "1,0 / hctx, CPUs busy" moved hctx
    # One submitter at QD1: a read's latency, with the NVMe volume beside the null one where the VM
    # has the bench's namespace.
    local nvme_devices=() volumes=() blk offset=0 volume
    if blk="$(nvme_namespace 4096 2>/dev/null)"; then
      for placement in hctx node; do
        ctl create-volume "pv-$placement" --queues 2 --size 256M \
          --backend "nvme:///dev/ng${blk#/dev/nvme}?offset=$offset" --placement "$placement" >/dev/null
        volumes+=("pv-$placement")
        nvme_devices+=("nvme-$placement|NVMe volume, --placement $placement|$(volume_device "pv-$placement")||$metrics pv-$placement")
        offset=$((offset + 256 * 1024 * 1024))
      done
    fi
    bench_group placement-qd1 "4k randread at QD1, 1 fio job, by placement" "lat" "" \
      "hctx|null volume, --placement hctx|$hctx||$metrics pl-hctx" \
      "node|null volume, --placement node|$node||$metrics pl-node" \
      "moved|null volume, --placement 1,0|$moved||$metrics pl-1-0" \
      "${nvme_devices[@]}"
    bench_ratio placement-qd1 "null volume, node / hctx" node hctx
    bench_ratio placement-qd1 "null volume, 1,0 / hctx" moved hctx
    bench_ratio placement-qd1 "NVMe volume, node / hctx" nvme-node nvme-hctx
    for placement in "${placements[@]}"; do
      volumes+=("pl-${placement/,/-}")
    done
    for volume in "${volumes[@]}"; do
      ctl delete-volume "$volume" >/dev/null
    done
    stop_agent >/dev/null
  }

  group_nvme() {
    local blk ng features copy zc="-" zc_name="NVMe volume, zero copy: not offered by this kernel"
    blk="$(nvme_namespace 4096)"
    ng="/dev/ng${blk#/dev/nvme}"
    [[ -c "$ng" ]] || fail "no generic char device $ng for $blk"
    fio --enghelp=io_uring_cmd >/dev/null 2>&1 || fail "this fio has no io_uring_cmd engine"
    # Two agents over the same namespace (read only): zero copy (where the
    # kernel offers UBLK_F_AUTO_BUF_REG, bit 11) and copy (--zero-copy off),
    # with statistics on: the lat runs read how long each read spent in the server.
    start_agent --log-level warn --metrics-address 127.0.0.1:9479 >/dev/null
    features="$(ctl node-info -o json | jq -r '.ublkFeatures // "0"')"
    if (((features >> 11) & 1)); then
      ctl create-volume bench-nvme-zc --backend "nvme://$ng" --queues 2 >/dev/null
      [[ "$(ctl get-volume bench-nvme-zc -o json | jq -r .volume.status.copyMode)" == zero_copy ]] ||
        fail "bench-nvme-zc is not in zero-copy mode"
      zc="$(volume_device bench-nvme-zc)" zc_name="NVMe volume, zero copy"
    fi
    start_extra_agent copy --metrics-address 127.0.0.1:9480 --zero-copy off
    extra_ctl copy create-volume bench-nvme-copy --backend "nvme://$ng" --queues 2 >/dev/null
    [[ "$(extra_ctl copy get-volume bench-nvme-copy -o json | jq -r .volume.status.copyMode)" == copy ]] ||
      fail "bench-nvme-copy is not in copy mode"
    copy="$(extra_device copy bench-nvme-copy)"
    # The kernel's own server over the same namespace: kublk's loop target on the block device
    # (O_DIRECT), in zero copy like ours, classic and batch.
    local kloop="-" kloop_b="-" kloop_name="kublk -t loop --auto_zc on $blk: not available"
    local kloop_b_name="kublk -t loop --auto_zc -b on $blk: not available"
    if [[ -x "${BLK_BENCH_KUBLK:-}" && "$zc" != - ]]; then
      kublk_add 102 -t loop --auto_zc "$blk"
      kloop=/dev/ublkb102 kloop_name="kublk -t loop -q 2 --auto_zc $blk"
      if kublk_has_batch; then
        kublk_add 103 -t loop --auto_zc -b "$blk"
        kloop_b=/dev/ublkb103 kloop_b_name="kublk -t loop -q 2 --auto_zc -b $blk (batch)"
      fi
    fi
    echo "namespace $blk / $ng, $(blockdev --getsize64 "$blk") bytes; copy: $copy, zero copy: $zc"
    # Passthrough: fio's io_uring_cmd engine and no O_DIRECT open (the char
    # device refuses it; passthrough bypasses the page cache anyway).
    bench_group nvme "one NVMe namespace (QEMU, 4096-byte LBAs), first 512 MiB; volumes of 2 queues" "iops lat seq" "--numjobs=2" \
      "raw|NVMe passthrough $ng (fio io_uring_cmd)|$ng|--ioengine=io_uring_cmd --cmd_type=nvme --direct=0 --size=512M" \
      "block|block device $blk|$blk|--size=512M" \
      "copy|NVMe volume, copy|$copy|--size=512M|http://127.0.0.1:9480/metrics bench-nvme-copy" \
      "zc|$zc_name|$zc|--size=512M|http://127.0.0.1:9479/metrics bench-nvme-zc" \
      "kloop|$kloop_name|$kloop|--size=512M" \
      "kloop_b|$kloop_b_name|$kloop_b|--size=512M"
    bench_ratio nvme "NVMe volume zero copy / raw passthrough" zc raw
    bench_ratio nvme "NVMe volume zero copy / kublk loop on the block device" zc kloop
    bench_ratio nvme "NVMe volume zero copy / kublk -b loop on the block device" zc kloop_b
    bench_ratio nvme "NVMe volume copy / raw passthrough" copy raw
    bench_ratio nvme "NVMe volume zero copy / block device" zc block
    bench_ratio nvme "block device / raw passthrough" block raw
    extra_ctl copy delete-volume bench-nvme-copy >/dev/null
    stop_extra_agent copy
    [[ "$zc" == - ]] || ctl delete-volume bench-nvme-zc >/dev/null
    [[ "$kloop" == - ]] || kublk_del 102
    [[ "$kloop_b" == - ]] || kublk_del 103
    stop_agent >/dev/null
  }

  group_nbd() {
    [[ -n "${BLK_BENCH_MODBASE:-}" ]] || fail "BLK_BENCH_MODBASE is not set (run tests/bench/run.sh)"
    modprobe -d "$BLK_BENCH_MODBASE" nbd nbds_max=2 || fail "modprobe nbd failed"
    nbdkit -f -i 127.0.0.1 -p 10809 memory 1G >>"$LOG_DIR/nbdkit.log" 2>&1 &
    local nbdkit_pid=$! ours
    on_exit kill "$nbdkit_pid"
    # shellcheck disable=SC2317 # called through wait_for
    tcp_open() { (exec 3<>/dev/tcp/127.0.0.1/10809) 2>/dev/null; }
    wait_for "nbdkit on 127.0.0.1:10809" 30 tcp_open
    # shellcheck disable=SC2317 # called through wait_for
    has_size() { (($(cat "/sys/block/$1/size") > 0)); }
    connect_kernel_client() {
      nbd-client -N bench 127.0.0.1 10809 "/dev/$1" -b 4096 >>"$LOG_DIR/nbd-client.log" 2>&1 ||
        fail "nbd-client could not connect /dev/$1"
      on_exit nbd-client -d "/dev/$1"
      wait_for "/dev/$1 to have a size" 30 has_size "$1"
    }
    connect_kernel_client nbd0
    # The same bytes for every reader: written once through the kernel client.
    dd if=/dev/urandom of=/dev/nbd0 bs=1M count=256 oflag=direct status=none ||
      fail "could not fill the export"
    # The kernel gives a disk of one queue mq-deadline, which runs most requests through a
    # kblockd worker; the agent sets its volumes' scheduler to none. The kernel client both ways.
    connect_kernel_client nbd1
    echo none >/sys/block/nbd1/queue/scheduler
    # With statistics on: the lat runs read how long each read spent in the server.
    start_agent --log-level warn --metrics-address 127.0.0.1:9481
    ctl create-volume bench-nbd --size 1G --backend nbd://127.0.0.1:10809/bench >/dev/null
    ours="$(volume_device bench-nbd)"
    local ours_mode classic deadline
    ours_mode="$(ctl get-volume bench-nbd -o json | jq -r .volume.status.ioMode)"
    # The same volume with classic commands: whether batch helps a backend that completes later.
    start_extra_agent nbd-classic --metrics-address off --batch-io off
    extra_ctl nbd-classic create-volume bench-nbd-classic --size 1G \
      --backend nbd://127.0.0.1:10809/bench >/dev/null
    classic="$(extra_device nbd-classic bench-nbd-classic)"
    # And one volume put back to the kernel's default, to show what the agent's none saves.
    ctl create-volume bench-nbd-deadline --size 1G --backend nbd://127.0.0.1:10809/bench >/dev/null
    deadline="$(volume_device bench-nbd-deadline)"
    echo mq-deadline >"/sys/block/${deadline#/dev/}/queue/scheduler"
    local disk
    for disk in nbd0 nbd1 "${ours#/dev/}" "${classic#/dev/}" "${deadline#/dev/}"; do
      echo "$disk: scheduler $(cat "/sys/block/$disk/queue/scheduler")"
    done
    grep -q '\[none\]' "/sys/block/${ours#/dev/}/queue/scheduler" || fail "bench-nbd's scheduler is not none"
    bench_group nbd "one nbdkit memory export on loopback TCP, first 256 MiB" "iops lat seq" "--numjobs=1" \
      "kernel|kernel NBD client /dev/nbd0 (1 connection; mq-deadline, the kernel's default)|/dev/nbd0|--size=256M" \
      "kernel_none|kernel NBD client /dev/nbd1 (1 connection), scheduler none|/dev/nbd1|--size=256M" \
      "ours|NBD volume, 1 queue, 1 connection (scheduler none, the agent's)|$ours|--size=256M|http://127.0.0.1:9481/metrics bench-nbd" \
      "deadline|NBD volume, scheduler put back to mq-deadline|$deadline|--size=256M" \
      "classic|NBD volume, --batch-io off (classic)|$classic|--size=256M" \
      "libnbd|fio's libnbd engine (1 connection)|nbd|--ioengine=nbd --uri=nbd://127.0.0.1:10809/bench --direct=0 --size=256M"
    bench_ratio nbd "NBD volume / kernel NBD client" ours kernel
    bench_ratio nbd "NBD volume / kernel NBD client, both scheduler none" ours kernel_none
    bench_ratio nbd "NBD volume / fio libnbd" ours libnbd
    bench_ratio nbd "io mode $ours_mode / classic (NBD volume)" ours classic
    bench_ratio nbd "scheduler none / mq-deadline (NBD volume)" ours deadline
    extra_ctl nbd-classic delete-volume bench-nbd-classic >/dev/null
    stop_extra_agent nbd-classic
    ctl delete-volume bench-nbd-deadline >/dev/null
    ctl delete-volume bench-nbd >/dev/null
    stop_agent >/dev/null
  }

  group_fabric() {
    # shellcheck source=../vm/scenarios/nvmet_lib.sh
    source "$(dirname "${BASH_SOURCE[0]}")/../vm/scenarios/nvmet_lib.sh"
    local nqn=nqn.2024-01.io.blk.bench:fabric
    nvmet_load
    nvmet_subsystem "$nqn" /tmp/bench-fabric.img 512M
    nvmet_port 1 4420
    start_agent --log-level warn --metrics-address 127.0.0.1:9482 >/dev/null
    ctl create-volume bench-tcp --backend "nvme-tcp://127.0.0.1:4420/$nqn?nsid=1" --queues 2 >/dev/null
    local ours ng blk
    ours="$(volume_device bench-tcp)"
    ng="$(ctl get-volume bench-tcp -o json | jq -r .volume.nvme.path)"
    blk="/dev/nvme${ng#/dev/ng}"
    [[ -c "$ng" && -b "$blk" ]] || fail "no head $ng / $blk for $nqn"
    echo "namespace $nqn nsid 1: head $ng / $blk; volume $ours ($(ctl get-volume bench-tcp -o json |
      jq -r .volume.status.copyMode))"
    bench_group fabric "one NVMe/TCP namespace (nvmet on loopback, 512 MiB tmpfs file); volume of 2 queues" "iops lat seq" "--numjobs=2" \
      "raw|NVMe/TCP passthrough on the head $ng (fio io_uring_cmd)|$ng|--ioengine=io_uring_cmd --cmd_type=nvme --direct=0 --size=512M" \
      "block|the head's block device $blk|$blk|--size=512M" \
      "ours|NVMe/TCP volume (agent defaults)|$ours|--size=512M|http://127.0.0.1:9482/metrics bench-tcp"
    bench_ratio fabric "NVMe/TCP volume / raw passthrough on the head" ours raw
    bench_ratio fabric "NVMe/TCP volume / the head's block device" ours block
    ctl delete-volume bench-tcp >/dev/null
    stop_agent >/dev/null
    nvmet_teardown
  }

  local group
  for group in "$@"; do
    step "group $group"
    case "$group" in
      defaults | null | placement | nvme | fabric | nbd) "group_$group" ;;
      *) fail "unknown group '$group' (want defaults, null, placement, nvme, fabric or nbd)" ;;
    esac
  done
}

main "$@"
