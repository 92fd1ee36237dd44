#!/usr/bin/env bash
# Sanitizer builds with clang, each in its own build dir:
#   asan: ASan + UBSan (LSan included); builds everything, the libFuzzer targets included, and runs
#         every host test (ctest -LE vm: unit, integration, deploy, style, brief fuzz runs) in
#         ${BLK_ASAN_BUILD_DIR:-build-asan}. This is where scripts/test.sh runs the host tests.
#   tsan: TSan; builds only what the threaded host tests need and runs those tests (the threaded NBD
#         integration tests, nbd_size_host and the agent concurrency host test) in
#         ${BLK_TSAN_BUILD_DIR:-build-tsan}.
# Any report fails: UBSan does not recover, ASan and TSan halt on the first error, and every
# process writes its reports under BUILD/sanitizer-reports (background agents included, whose exit
# status a test may not see); a report file left there fails the run. Suppressions, for
# third-party code only, are in tests/sanitize/.
# Usage: scripts/sanitize.sh asan|tsan [build|test|all [CTEST ARGS...]]   (default all;
# scripts/test.sh builds, then tests, each tree as a phase of its own). CTEST ARGS narrow
# the tests further, e.g. scripts/sanitize.sh asan test -R Nbd. A unity build (CMAKE_UNITY_BUILD: a
# third of the compile time) unless BLK_UNITY_BUILD=OFF. Tests run $(nproc) at a time; those that
# share a machine resource (loopback ports picked free, loop devices) hold a ctest RESOURCE_LOCK.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kind="${1:-}"
step="${2:-all}"
shift $(($# < 2 ? $# : 2))
supp="$root/tests/sanitize"
case "$kind" in
  asan)
    build="${BLK_ASAN_BUILD_DIR:-$root/build-asan}"
    sanitize=address,undefined
    targets=(all)
    fuzz=ON
    tests=(-LE vm)
    ;;
  tsan)
    build="${BLK_TSAN_BUILD_DIR:-$root/build-tsan}"
    sanitize=thread
    fuzz=OFF
    targets=(nbd_integration_tests blkagent blkctl blk_health_check)
    # The NBD backend tests that drive one connection from the test's thread, with no restart,
    # reconnect or fake server thread, run no second thread of ours: TSan has nothing to check.
    single_thread='Fua.*|WriteZeroesAndFua.*|Simple.*|RandomWrites.*|RequestsAbove.*|Blocksize.*|'
    single_thread+='ServerErrorsMapToErrno|ErrorFile.*|Delayed.*|LargerVolume.*|ReadOnlyExport.*|'
    single_thread+='UnknownExport.*|QemuNbdServesTheVolume|NbdServerServesTheVolume'
    tests=(-L integration -R '^(.*Nbd.*|nbd_size_host|agent_concurrency_host)$'
      -E "^NbdBackendTest\\.($single_thread)\$")
    ;;
  *)
    echo "usage: $0 asan|tsan [build|test|all]" >&2
    exit 2
    ;;
esac
if [[ $step != build && $step != test && $step != all ]]; then
  echo "usage: $0 asan|tsan [build|test|all]" >&2
  exit 2
fi

if [[ $step != test ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DBLK_WERROR=ON -DBLK_FUZZ="$fuzz" -DBLK_SANITIZE="$sanitize" \
    -DCMAKE_UNITY_BUILD="${BLK_UNITY_BUILD:-ON}" >/dev/null
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
fi
[[ $step == build ]] && exit 0

reports="$build/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
common="halt_on_error=1:print_stacktrace=1:log_path=$reports/report"
# Symbolized stacks (llvm-14 comes with clang-14).
symbolizer="$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)"
if [[ -n $symbolizer ]]; then
  common+=":external_symbolizer_path=$symbolizer"
fi
export ASAN_OPTIONS="$common:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="$common:suppressions=$supp/ubsan.supp"
export TSAN_OPTIONS="$common:second_deadlock_stack=1:suppressions=$supp/tsan.supp"

status=0
(cd "$build" && ctest --output-on-failure --timeout 600 -j "$(nproc)" "${tests[@]}" "$@") || status=$?
shopt -s nullglob
found=("$reports"/report*)
if ((${#found[@]} > 0)); then
  for f in "${found[@]}"; do
    echo "=== $f"
    cat "$f"
  done
  echo "sanitize $kind: ${#found[@]} sanitizer report(s), see above" >&2
  exit 1
fi
if ((status != 0)); then
  echo "sanitize $kind: tests failed" >&2
  exit "$status"
fi
echo "sanitize $kind: passed, no sanitizer reports"
