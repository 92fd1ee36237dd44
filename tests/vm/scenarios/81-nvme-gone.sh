#!/usr/bin/env bash
# An NVMe namespace that disappears (its controller hot-removed from the PCI bus):
# I/O on the volume fails with EIO promptly instead of hanging, the agent stays
# responsive and reports the volume failed with the namespace's path, and
# delete-volume removes the device. Removes the 4096-byte namespace's
# controller for good: keep this the last scenario that uses it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

volume_json() { ctl get-volume "$1" -o json; }

main() {
  local blk ng controller pci
  blk="$(nvme_namespace 4096)"
  ng="/dev/ng${blk#/dev/nvme}"
  controller="$(basename "$(readlink -f "/sys/block/${blk#/dev/}/device")")"
  pci="$(readlink -f "/sys/class/nvme/$controller/device")"
  [[ -e "$pci/remove" ]] || fail "no PCI device behind $controller ($pci)"
  echo "namespace $blk ($ng) on controller $controller, PCI device ${pci##*/}"

  start_agent
  ctl create-volume gone --size 64M --backend "nvme://$ng"
  local dev
  dev="$(volume_device gone)"
  fio_verify "$dev" 16M
  expect_eq "state before the removal" VOLUME_STATE_LIVE "$(volume_json gone | jq -r .volume.status.state)"

  step "the controller is removed from the PCI bus"
  echo 1 >"$pci/remove"
  wait_for "$ng to disappear" 30 test ! -e "$ng"

  step "reads fail with EIO, promptly"
  local out rc=0
  out="$(timeout 60 dd if="$dev" of=/dev/null bs=4k count=1 skip=100 iflag=direct 2>&1)" || rc=$?
  echo "dd: rc $rc: $out"
  ((rc != 124)) || fail "a read of $dev hung (still running after 60s)"
  ((rc != 0)) || fail "a read of $dev succeeded after its namespace was removed"
  [[ "$out" == *"Input/output error"* ]] || fail "the read failed, but not with EIO: $out"
  rc=0
  timeout 60 fio --name=gone --filename="$dev" --rw=randread --bs=4k --size=16M --direct=1 \
    --ioengine=psync --runtime=5 --time_based >"$WORK/fio.out" 2>&1 || rc=$?
  ((rc != 124)) || fail "fio on $dev hung"
  ((rc != 0)) || fail "fio reads of $dev succeeded after its namespace was removed"
  grep -q "Input/output error" "$WORK/fio.out" || fail "fio failed, but not with EIO: $(cat "$WORK/fio.out")"
  echo "ok: fio fails with EIO"

  step "the agent answers and reports the volume failed, naming the namespace"
  timeout 10 blkctl --socket "$AGENT_SOCKET" list-volumes || fail "list-volumes did not answer"
  local json
  json="$(volume_json gone)"
  echo "$json" | jq -c .volume.status
  expect_eq "state" VOLUME_STATE_FAILED "$(jq -r .volume.status.state <<<"$json")"
  [[ "$(jq -r .volume.status.message <<<"$json")" == *"namespace $ng is gone"* ]] ||
    fail "the message does not name $ng: $(jq -r .volume.status.message <<<"$json")"
  local info
  info="$(curl -fsS "http://127.0.0.1:9477/metrics" | grep '^blk_volume_info{' | grep 'volume="gone"')" || true
  [[ "$info" == *'state="failed"'* ]] || fail "/metrics blk_volume_info for gone: '$info'"
  echo "ok: $info"

  step "delete-volume removes the device"
  ctl delete-volume gone --force
  wait_for "$dev to disappear" 30 test ! -e "$dev"
  expect_eq "volumes left" "" "$(ctl list-volumes -o json | jq -r '[.volumes[]?.id] | join(",")')"
  stop_agent
}

main "$@"
