#!/usr/bin/env bash
# CI's static checks, run before the tests (.ci/run):
#  1. a clang build of the libraries and binaries with -Wthread-safety (ABSL_GUARDED_BY) and
#     -Werror, in ${BLK_CLANG_BUILD_DIR:-build-clang};
#  2. clang-tidy on the tree's sources (BLK_TIDY_CHANGED=1: only those changed since origin);
#  3. the main (gcc) build in ${BLK_BUILD_DIR:-build} configured with -Werror, which
#     scripts/test.sh then builds and tests.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BLK_BUILD_DIR:-$root/build}"
clang_build="${BLK_CLANG_BUILD_DIR:-$root/build-clang}"

"$root/scripts/setup.sh"

start=$SECONDS
echo "ci-checks: clang build with -Wthread-safety -Werror in $clang_build"
cmake -S "$root" -B "$clang_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DBLK_WERROR=ON -DBLK_FUZZ=OFF
# The libraries and binaries; the test binaries are left to the gcc build, which runs them.
cmake --build "$clang_build" -j "$(nproc)" --target blk_server blk_agent blkctl blkagent blk_health_check
clang_seconds=$((SECONDS - start))

start=$SECONDS
tidy_args=("$clang_build")
if [[ ${BLK_TIDY_CHANGED:-0} == 1 ]]; then
  tidy_args+=(--changed)
fi
"$root/tests/clang_tidy.sh" "${tidy_args[@]}"
tidy_seconds=$((SECONDS - start))

echo "ci-checks: gcc build configured with -Werror in $build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBLK_WERROR=ON

echo "ci-checks: passed (clang build ${clang_seconds}s, clang-tidy ${tidy_seconds}s)"
