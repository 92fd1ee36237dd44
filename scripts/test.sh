#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: host unit and integration tests,
# then the VM scenarios on a real 7.x and 6.12 kernel (label "vm"; skip them with -LE vm).
# Extra arguments go to ctest, e.g. scripts/test.sh -R Volume.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BLK_BUILD_DIR:-$root/build}"

"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure --timeout 3600 "$@"
