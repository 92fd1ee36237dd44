#!/usr/bin/env bash
# The benchmark still runs (newest kernel only: one kernel shows it does):
# tests/bench/guest.sh's defaults group (a fresh agent's volume, alone with
# kublk and null_blk; its NVMe part where the VM has a 4096-byte namespace)
# and null group, 1 round of 1 s 4k randread runs without warm-up (the
# placement group, seconds per run with every CPU spinning, stays out), on
# our null volume, the metrics-off one, the classic one
# (--batch-io off), null_blk and, where
# tests/bench/fetch-kublk.sh has cached it for this kernel, kublk and kublk -b;
# then tests/bench/report.sh prints its table, which must carry a number for
# every device that was there, and the CPU table our queue threads' time
# with its user-space part.
# A smoke test: no speed is asserted.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

one_kernel_only newest "the bench smoke"
bench="${BLK_SOURCE_DIR:?all.sh exports BLK_SOURCE_DIR}/tests/bench"
kublk="${BLK_VM_CACHE:-/var/cache/blk-vm}/$BLK_VM_KERNEL/kublk/kublk"
if [[ -z "${BLK_BENCH_KUBLK:-}" && -x "$kublk" ]]; then
  export BLK_BENCH_KUBLK="$kublk"
fi

step "the defaults and null groups, 1 round of 1 s"
results="$LOG_DIR/bench"
BLK_BENCH_RUNTIME=1 BLK_BENCH_ROUNDS=1 BLK_BENCH_RAMP=0 BLK_BENCH_TESTS=iops \
  BENCH_GROUPS_DIR="$results/$BLK_VM_KERNEL/groups" BLK_SCENARIO_OUT="$LOG_DIR/guest" \
  "$bench/guest.sh" "$BLK_BUILD_DIR" defaults null || fail "tests/bench/guest.sh failed"

step "the report"
"$bench/report.sh" "$results" "$BLK_VM_KERNEL" | tee "$LOG_DIR/bench.md"
# table_has FIRST_CELL SECOND_CELL_REGEX: a row of bench.md starts so.
table_has() {
  awk -F' [|] ' -v first="| $1" -v second="$2" \
    '$1 == first && $2 ~ ("^" second "$") { found = 1 } END { exit !found }' "$LOG_DIR/bench.md"
}
for device in "ublk null volume, the agent's defaults" \
  "ublk null volume (blkagent)" "ublk null volume, --metrics-address off" \
  "ublk null volume, --batch-io off (classic)" "null_blk /dev/nullb0"; do
  table_has "$device" '[0-9]+' || fail "no IOPS for $device in the table"
done
if [[ -n "${BLK_BENCH_KUBLK:-}" ]]; then
  table_has "kublk -t null -q 2" '[0-9]+' || fail "no IOPS for kublk in the table"
fi
if (nvme_namespace 4096 >/dev/null 2>&1); then
  table_has "NVMe volume, the agent's defaults (zero_copy)" '[0-9]+' ||
    table_has "NVMe volume, the agent's defaults (copy)" '[0-9]+' ||
    fail "no IOPS for the defaults group's NVMe volume in the table"
fi
table_has "null volume / null_blk" '[0-9.]+x( [(][0-9.]+-[0-9.]+[)])?' || fail "no ratio null volume / null_blk in the table"
# Where the CPU went: our queue threads served every read of our volume, and some of their time
# was in user space (the loop itself; under a tick per run would print 0).
table_has "ublk null volume (blkagent)" \
  '.*blkqN-N [0-9.]+ [(]user [0-9.]+[)].*, idle [0-9.]+, rest [0-9.]+ [|]' ||
  fail "the CPU table has no time of the queue threads (blkqN-N), with its user part, for our null volume"
