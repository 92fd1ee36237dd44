#!/usr/bin/env bash
# Usage: tests/bench/run.sh [all|GROUP...] BUILD_DIR
#
# Every comparison of issue 11 in one VM boot per kernel (tests/bench/guest.sh
# has the details), GROUP being:
#   defaults  out of the box: a fresh agent's null volume (no flags) vs kublk
#         and null_blk, alone, 4 s rounds: the README's headline figure; then
#         the same agent's NVMe volume vs raw passthrough and the block device
#   null  our `null` volume vs kublk's null target (`kublk add -t null -q 2`,
#         and with -b, batch), vs null_blk, and with per-I/O statistics vs
#         without (--metrics-address off), and batch I/O commands (UBLK_F_BATCH_IO
#         where offered) vs classic (--batch-io off)
#   placement  null volumes with --placement hctx, node and 1,0, by fio jobs (1, 2, 4), and with
#         every CPU busy (not in `all`: a question for one boot, not a comparison to repeat)
#   nvme  an NVMe volume (copy, zero copy) vs raw passthrough and the block device
#   fabric  an NVMe/TCP volume vs raw passthrough on the same namespace's head and its block device
#   nbd   an NBD volume (batch, classic, and put back to mq-deadline) vs the kernel's NBD client
#         (mq-deadline and none) and vs fio's libnbd engine on the same nbdkit export
# `all` (the default) is all five. Every device gets fio 4k randread QD32
# IOPS (with where the CPU went, by thread), QD1 latency p50/p99 and 128k
# sequential read MB/s.
# kublk is built by tests/bench/fetch-kublk.sh (cached; without it the null
# group reports kublk as not available). Results in
# ${BLK_BENCH_OUT:-BUILD_DIR/bench-results}: bench.json and bench.md (printed
# at the end), and per kernel FLAVOUR/guest.log with the fio logs. A
# measurement, not a test: there is no threshold.
#
# Environment: BLK_BENCH_KERNELS (default newest; "newest lts" for both; 6.12
#              has no kublk), BLK_BENCH_RUNTIME (seconds per fio run, default
#              10), BLK_BENCH_ROUNDS (default 3), BLK_BENCH_RAMP (fio warm-up
#              seconds, default 1), BLK_BENCH_TESTS (only these of iops lat seq)
set -euo pipefail

# Everything runs inside main: bash parses a function whole before running it,
# so editing this file while it runs (the VM takes minutes) cannot derail it.
main() {
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  (($# > 0)) || {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
  }
  build_dir="${*: -1}"
  local groups=("${@:1:$#-1}") group
  ((${#groups[@]} > 0)) || groups=(all)
  [[ "${groups[*]}" != all ]] || groups=(defaults null nvme fabric nbd)
  for group in "${groups[@]}"; do
    [[ "$group" =~ ^(defaults|null|placement|nvme|fabric|nbd)$ ]] || {
      echo "bench: unknown group '$group' (want all, defaults, null, placement, nvme, fabric or nbd)" >&2
      exit 2
    }
  done
  for tool in "$build_dir/bin/blkagent" "$build_dir/bin/blkctl"; do
    [[ -x "$tool" ]] || {
      echo "bench: $tool missing (build first)" >&2
      exit 2
    }
  done
  if [[ " ${groups[*]} " == *" nbd "* ]]; then
    for tool in nbd-client nbdkit; do
      command -v "$tool" >/dev/null || {
        echo "bench: $tool missing (scripts/setup.sh installs it)" >&2
        exit 2
      }
    done
  fi
  build_dir="$(cd "$build_dir" && pwd)"
  out="${BLK_BENCH_OUT:-$build_dir/bench-results}"
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  read -ra kernels <<<"${BLK_BENCH_KERNELS:-newest}"

  # Enough for 3 rounds of 10 s runs of every group (null: 8 devices x 3 tests, nvme: 6 x 3,
  # fabric: 3 x 3, nbd: 6 x 3, placement: 12 x 1; defaults: 6 x 1 of 4 s), with room for boot and
  # setup.
  local runs_per_round=$((8 * 3 + 6 * 3 + 3 * 3 + 6 * 3 + 12))
  local timeout_s=$((600 + ${BLK_BENCH_ROUNDS:-3} * runs_per_round * (${BLK_BENCH_RUNTIME:-10} + 5)))
  local status=0 kernel kernel_dir kublk_dir
  for kernel in "${kernels[@]}"; do
    unset BLK_BENCH_KUBLK
    if [[ "$kernel" == newest && " ${groups[*]} " =~ " "(defaults|null|nvme)" " ]]; then
      if kublk_dir="$("$here/fetch-kublk.sh" "$kernel")"; then
        export BLK_BENCH_KUBLK="$kublk_dir/kublk"
      else
        echo "bench: no kublk for the $kernel kernel; the null and nvme groups go without it" >&2
      fi
    fi
    # The guest loads nbd.ko from the same extracted kernel tree as ublk_drv.
    kernel_dir="$("$here/../vm/fetch-kernel.sh" "$kernel")"
    BLK_BENCH_MODBASE="$kernel_dir/$(cat "$kernel_dir/modbase")"
    export BLK_BENCH_MODBASE
    local vm_args=(--kernel "$kernel" --out "$out/$kernel" --keep "$build_dir" --timeout "$timeout_s")
    rm -rf "$out/$kernel/groups"
    if [[ " ${groups[*]} " =~ " "(defaults|placement|nvme)" " ]]; then
      mkdir -p "$out/$kernel"
      truncate -s 1G "$out/$kernel/nvme-bench.img"
      vm_args+=(--nvme "$out/$kernel/nvme-bench.img:4096")
    fi
    "$here/../vm/run-vm.sh" "${vm_args[@]}" -- "$here/guest.sh" "$build_dir" "${groups[@]}" ||
      status=$?
    rm -f "$out/$kernel/nvme-bench.img"
  done
  "$here/report.sh" "$out" "${kernels[@]}" || status=1
  return "$status"
}

main "$@"
