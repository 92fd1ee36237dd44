#!/usr/bin/env bash
# CI's static checks and sanitizer runs, before the main tests (.ci/run):
#  1. the clang ASan+UBSan build (scripts/sanitize.sh asan) of everything but the fuzz targets,
#     with -Wthread-safety (ABSL_GUARDED_BY) and -Werror, in ${BLK_CLANG_BUILD_DIR:-build-clang};
#  2. clang-tidy on the sources changed since the last commit found clean (.ci/tidy-clean-at;
#     BLK_TIDY_WHOLE=1: the whole tree), from a clang configuration that compiles each source
#     alone, in ${BLK_TIDY_BUILD_DIR:-build-tidy} (only its generated headers are built);
#  3. the host tests in that build (ctest -LE 'vm|fuzz'), no sanitizer report allowed;
#  4. the TSan build of only what the threaded host tests need, and those tests (the NBD
#     integration tests, nbd_size_host, agent_concurrency_host; scripts/sanitize.sh tsan), in
#     ${BLK_TSAN_BUILD_DIR:-build-tsan}, no sanitizer report allowed;
#  5. the main (gcc) build in ${BLK_BUILD_DIR:-build} configured with -Werror, which
#     scripts/test.sh then builds and tests.
# Every CI build is a unity build (CMAKE_UNITY_BUILD: sources compiled in batches, about a third
# of the compile time on 2 cores); clang-tidy checks each source on its own, and the README's
# build compiles each alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BLK_BUILD_DIR:-$root/build}"
clang_build="${BLK_CLANG_BUILD_DIR:-$root/build-clang}"
tidy_build="${BLK_TIDY_BUILD_DIR:-$root/build-tidy}"
export BLK_UNITY_BUILD=ON  # scripts/sanitize.sh

"$root/scripts/setup.sh"

start=$SECONDS
echo "ci-checks: clang ASan+UBSan build with -Wthread-safety -Werror in $clang_build"
BLK_ASAN_BUILD_DIR="$clang_build" "$root/scripts/sanitize.sh" asan build
clang_seconds=$((SECONDS - start))

start=$SECONDS
cmake -S "$root" -B "$tidy_build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DBLK_FUZZ=OFF >/dev/null
tidy_args=("$tidy_build")
if [[ ${BLK_TIDY_WHOLE:-0} != 1 ]]; then
  tidy_args+=(--since-clean)
fi
"$root/tests/clang_tidy.sh" "${tidy_args[@]}"
tidy_seconds=$((SECONDS - start))

start=$SECONDS
echo "ci-checks: host tests under ASan+UBSan in $clang_build"
BLK_ASAN_BUILD_DIR="$clang_build" "$root/scripts/sanitize.sh" asan test
asan_seconds=$((SECONDS - start))

start=$SECONDS
echo "ci-checks: clang TSan build of the threaded host tests"
"$root/scripts/sanitize.sh" tsan build
tsan_build_seconds=$((SECONDS - start))

start=$SECONDS
echo "ci-checks: threaded host tests under TSan"
"$root/scripts/sanitize.sh" tsan test
tsan_seconds=$((SECONDS - start))

echo "ci-checks: gcc build configured with -Werror in $build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBLK_WERROR=ON \
  -DCMAKE_UNITY_BUILD=ON

echo "ci-checks: passed (clang ASan+UBSan build ${clang_seconds}s, clang-tidy ${tidy_seconds}s," \
  "ASan+UBSan tests ${asan_seconds}s, TSan build ${tsan_build_seconds}s, TSan tests ${tsan_seconds}s)"
