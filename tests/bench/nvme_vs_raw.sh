#!/usr/bin/env bash
# Guest script (run by tests/bench/nvme_bench.sh through tests/vm/run-vm.sh):
#   nvme_vs_raw.sh BUILD_DIR
# fio 4k random reads (tests/bench/lib.sh bench_iops: iodepth 32, O_DIRECT) on one NVMe namespace
# four ways, alternating within this one boot:
#   A  /dev/ngXnY with fio's io_uring_cmd engine (NVMe passthrough: the ceiling)
#   B  /dev/nvmeXnY with io_uring (the kernel's block layer)
#   C  a ublk NVMe volume over the whole namespace, copy mode (--zero-copy off)
#   D  the same volume, zero copy (UBLK_F_AUTO_BUF_REG), where the kernel has it
# Prints the IOPS of every run and each mean's ratio to A, and writes them to
# $BLK_VM_OUT/bench.json. No threshold: TCG numbers move 2x between boots, only
# ratios within one boot mean something.
#
# Environment: BLK_BENCH_RUNTIME (seconds per run, default 10),
#              BLK_BENCH_ROUNDS (rounds, default 3)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

main() {
  build_dir="${1:?usage: nvme_vs_raw.sh BUILD_DIR}"
  build_dir="$(cd "$build_dir" && pwd)"
  export PATH="$build_dir/bin:$PATH"
  # shellcheck source=../vm/scenarios/lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/../vm/scenarios/lib.sh"
  # shellcheck source=lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
  runtime="$bench_runtime"
  rounds="$bench_rounds"
  blk="$(nvme_namespace 4096)"
  ng="/dev/ng${blk#/dev/nvme}"
  [[ -c "$ng" ]] || fail "no generic char device $ng for $blk"
  fio --enghelp=io_uring_cmd >/dev/null 2>&1 || fail "this fio has no io_uring_cmd engine"

  echo "kernel $(uname -r), $(nproc) cpus; namespace $blk / $ng, $(blockdev --getsize64 "$blk") bytes"
  echo "fio: 4k randread, iodepth 32, 1 job, direct, ${runtime}s per run, $rounds rounds"

  # Prints the IOPS of the NVMe volume with the agent started with ARGS; checks the copy mode.
  measure_volume() {
    local label="$1" mode="$2" dev iops
    shift 2
    start_agent --log-level warn --metrics-address off "$@" >/dev/null
    ctl create-volume bench-nvme --backend "nvme://$ng" >/dev/null
    dev="$(volume_device bench-nvme)"
    [[ "$(ctl get-volume bench-nvme -o json | jq -r .volume.status.copyMode)" == "$mode" ]] ||
      fail "bench-nvme is not in $mode mode"
    iops="$(bench_iops "$dev" "$label" --size=512M)"
    ctl delete-volume bench-nvme >/dev/null
    stop_agent >/dev/null
    echo "$iops"
  }

  # Zero copy only where the kernel offers UBLK_F_AUTO_BUF_REG (bit 11).
  start_agent --log-level warn --metrics-address off >/dev/null
  features="$(ctl node-info -o json | jq -r '.ublkFeatures // "0"')"
  stop_agent >/dev/null
  zero_copy=$(((features >> 11) & 1))

  a_runs=() b_runs=() c_runs=() d_runs=()
  for ((round = 1; round <= rounds; round++)); do
    echo "$(date +%T) round $round"
    # fio takes the last value of an option: passthrough instead of bench_iops' io_uring, and no
    # O_DIRECT open (the char device refuses it; passthrough bypasses the page cache anyway).
    a="$(bench_iops "$ng" "A$round" --ioengine=io_uring_cmd --cmd_type=nvme --direct=0 --size=512M)"
    echo "round $round  A passthrough $ng   $a IOPS"
    b="$(bench_iops "$blk" "B$round" --size=512M)"
    echo "round $round  B block device $blk $b IOPS"
    c="$(measure_volume "C$round" copy --zero-copy off)"
    echo "round $round  C volume, copy        $c IOPS"
    a_runs+=("$a") b_runs+=("$b") c_runs+=("$c")
    if ((zero_copy)); then
      d="$(measure_volume "D$round" zero_copy)"
      echo "round $round  D volume, zero copy   $d IOPS"
      d_runs+=("$d")
    fi
  done

  series() { printf '%s\n' "$@" | jq -s 'map(select(. != null))'; }
  jq -n --arg kernel "$(uname -r)" --argjson runtime "$runtime" \
    --argjson a "$(series "${a_runs[@]}")" --argjson b "$(series "${b_runs[@]}")" \
    --argjson c "$(series "${c_runs[@]}")" --argjson d "$(series "${d_runs[@]}")" '
    def mean: if length == 0 then null else (add / length | floor) end;
    def ratio(x; y): if x == null or y == null then null else ((x / y * 1000 | round) / 1000) end;
    { kernel: $kernel, runtime_seconds: $runtime,
      a: { name: "NVMe passthrough, fio io_uring_cmd", iops: $a, mean: ($a | mean) },
      b: { name: "block device, fio io_uring", iops: $b, mean: ($b | mean) },
      c: { name: "ublk NVMe volume, copy", iops: $c, mean: ($c | mean) },
      d: { name: "ublk NVMe volume, zero copy", iops: $d, mean: ($d | mean) } }
    | .ratio_b_over_a = ratio(.b.mean; .a.mean)
    | .ratio_c_over_a = ratio(.c.mean; .a.mean)
    | .ratio_d_over_a = ratio(.d.mean; .a.mean)
    | .ratio_d_over_c = ratio(.d.mean; .c.mean)' >"$BLK_VM_OUT/bench.json"

  jq -r '"means: A \(.a.mean), B \(.b.mean), C \(.c.mean), D \(.d.mean) IOPS; B/A \(.ratio_b_over_a), C/A \(.ratio_c_over_a), D/A \(.ratio_d_over_a), D/C \(.ratio_d_over_c)"' \
    "$BLK_VM_OUT/bench.json"
}

main "$@"
