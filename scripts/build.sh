#!/usr/bin/env bash
# Configures and builds everything into ${BLK_BUILD_DIR:-build}. Idempotent and incremental.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BLK_BUILD_DIR:-$root/build}"

"$root/scripts/setup.sh"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build" -j "$(nproc)"
