#!/usr/bin/env bash
# Four file volumes with two queues each, written and verified at the same time.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
one_kernel_only newest "four volumes at once exercise the agent's queues; 10 and 70 serve file volumes on both kernels"

start_agent
for i in 1 2 3 4; do
  ctl create-volume "multi-$i" --size 64M --queues 2 --backend "file://$WORK/multi-$i.img"
done
expect_eq "distinct devices" 4 "$(ctl list-volumes -o json | jq '[.volumes[].status.devicePath] | unique | length')"

pids=()
for i in 1 2 3 4; do
  fio_verify "$(volume_device "multi-$i")" 16M &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid" || fail "a concurrent verify failed (see the fio logs in $LOG_DIR)"
done
echo "ok: all four volumes verified concurrently"

for i in 1 2 3 4; do ctl delete-volume "multi-$i"; done
stop_agent
