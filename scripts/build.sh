#!/usr/bin/env bash
# Configures and builds the main (gcc) tree ${BLK_BUILD_DIR:-build}: every target, or only the
# TARGETs given (the demo builds the agent and blkctl; scripts/test.sh what the VM scenarios run).
# Idempotent and incremental. A unity build (sources compiled in batches, a third of the compile
# time on 2 cores) unless BLK_UNITY_BUILD=OFF; BLK_WERROR=ON (CI) makes warnings errors.
# Usage: scripts/build.sh [TARGET...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BLK_BUILD_DIR:-$root/build}"

"$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_UNITY_BUILD="${BLK_UNITY_BUILD:-ON}" -DBLK_WERROR="${BLK_WERROR:-OFF}" >/dev/null
targets=()
(($# > 0)) && targets=(--target "$@")
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
