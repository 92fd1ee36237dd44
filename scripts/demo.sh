#!/usr/bin/env bash
# The main job: builds what is missing, then starts the agent, creates volumes, writes and
# verifies data with fio and lists the volumes. Natively when this host has ublk, else inside a
# VM booting Debian's newest kernel (tests/vm/run-vm.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BLK_BUILD_DIR:-$root/build}"

"$root/scripts/build.sh" blkagent blkctl

if [[ ! -e /dev/ublk-control ]]; then
  modprobe ublk_drv 2>/dev/null || true
fi
if [[ -e /dev/ublk-control ]]; then
  exec "$root/scripts/demo-volumes.sh" "$build/bin"
fi

echo "demo: this host ($(uname -r)) has no ublk; running the demo in a VM with Debian's newest kernel"
out="${BLK_DEMO_OUT:-$build/demo-vm}"
rm -rf "$out" && mkdir -p "$out"
exec "$root/tests/vm/run-vm.sh" --kernel newest --out "$out" -- \
  "$root/scripts/demo-volumes.sh" "$build/bin"
