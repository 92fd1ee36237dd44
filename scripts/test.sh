#!/usr/bin/env bash
# Every test, in one command (the README's; CI's too, .ci/run):
#   host: clang-tidy on what changed since the last clean point (BLK_TEST_TIDY=1, as CI sets
#         it; tests/clang_tidy.sh --since-clean), then the unit, integration, deploy, style and
#         brief fuzz tests, once, in the clang ASan+UBSan tree (scripts/sanitize.sh asan), then
#         the threaded ones in the TSan tree;
#   vm:   the VM scenarios on kernels 7.x and 6.12, both VMs at once (tests/vm/run-scenarios.sh),
#         on the main (gcc) tree, which builds only what they run (vm_binaries);
#   package, image: the Debian package built, linted and installed into a fresh chroot
#         (scripts/package.sh), and the node image made from it and checked
#         (deploy/image/build.sh); full runs only.
# Installs what is missing first; the kernels download while the host part runs. A failed host
# part does not stop the VM part. Ends with each phase's time and one line counting every test.
# Usage: scripts/test.sh [--host [CTEST ARGS...] | --vm [SCENARIO REGEX]]
#   --host  only the host part; CTEST ARGS narrow it (e.g. --host -R Volume)
#   --vm    only the VM scenarios, or those matching the regex (e.g. --vm '^6[0-9]-')
# BLK_WERROR=ON (CI) makes warnings errors in the gcc tree (the clang trees always do).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BLK_BUILD_DIR:-$root/build}"
# shellcheck source=scripts/lib/phases.sh
source "$root/scripts/lib/phases.sh"

part=all
case "${1:-}" in
  --host | --vm) part="${1#--}" && shift ;;
  "") ;;
  *)
    echo "usage: $0 [--host [CTEST ARGS...] | --vm [SCENARIO REGEX]]" >&2
    exit 2
    ;;
esac
if [[ $part == vm ]] && (($# > 1)); then
  echo "usage: $0 --vm [SCENARIO REGEX]" >&2
  exit 2
fi
trap phase_report EXIT

phase setup "$root/scripts/setup.sh"

# The host part first, at full speed: beside the VMs (each keeps about one core busy) every
# phase ran 3 to 7 times slower, the VMs' included.
kernels_pid=""
if [[ $part != host ]]; then
  mkdir -p "$build"
  kernels_log="$build/kernels-fetch.log"
  # One after the other: each flavour has its own private apt, but they share the cache root.
  (for kernel in newest lts; do "$root/tests/vm/fetch-kernel.sh" "$kernel" >/dev/null || exit 1; done) \
    >"$kernels_log" 2>&1 &
  kernels_pid=$!
fi

host_status=0
if [[ $part != vm ]]; then
  # clang-tidy from a clang configuration that compiles each source alone (only its generated
  # headers are built); BLK_TIDY_WHOLE=1 checks the whole tree (~25 minutes on 2 cores).
  tidy() {
    local tidy_build="${BLK_TIDY_BUILD_DIR:-$root/build-tidy}" since=(--since-clean)
    [[ ${BLK_TIDY_WHOLE:-0} == 1 ]] && since=()
    cmake -S "$root" -B "$tidy_build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null &&
      "$root/tests/clang_tidy.sh" "$tidy_build" "${since[@]}"
  }
  host() {
    if [[ ${BLK_TEST_TIDY:-0} == 1 ]]; then
      phase clang-tidy tidy || return
    fi
    phase asan-ubsan-build "$root/scripts/sanitize.sh" asan build || return
    phase asan-ubsan-host-tests "$root/scripts/sanitize.sh" asan test "$@" || return
    if (($# == 0)); then
      phase tsan-build "$root/scripts/sanitize.sh" tsan build || return
      phase tsan-host-tests "$root/scripts/sanitize.sh" tsan test || return
    fi
  }
  host "$@" || host_status=$?
fi

vm_status=0
if [[ $part != host ]]; then
  phase vm-binaries-build "$root/scripts/build.sh" vm_binaries || exit
  # Waited for here, not in a phase: a phase runs in a subshell, whose child it is not.
  started=$SECONDS
  if ! wait "$kernels_pid"; then
    phase_record vm-kernels-fetch $((SECONDS - started)) 1
    cat "$kernels_log" >&2
    echo "test: could not fetch the VM kernels (above)" >&2
    exit 1
  fi
  phase_record vm-kernels-fetch $((SECONDS - started)) 0
  # The Debian package (built, lintian-clean, installed into a fresh chroot) and the node image
  # made from it, checked against the DaemonSet: beside the VMs, as they wait mostly on the
  # mirror and dpkg (5 minutes alone, about one more for the VMs beside them). Full runs only.
  if [[ $part == all ]]; then
    deploy_log="$build/package-and-image.log"
    (phase package "$root/scripts/package.sh" && phase image "$root/deploy/image/build.sh") \
      >"$deploy_log" 2>&1 &
    deploy_pid=$!
  fi
  vm_args=("$build")
  [[ $part == vm && $# == 1 ]] && vm_args+=("$1")
  phase vm-scenarios "$root/tests/vm/run-scenarios.sh" "${vm_args[@]}" || vm_status=$?
fi
package_status=0
if [[ -n ${deploy_pid:-} ]] && ! wait "$deploy_pid"; then
  package_status=1
  tail -n 60 "$deploy_log" >&2
  echo "test: the package or image phase failed (above; all of it in $deploy_log)" >&2
fi
((host_status == 0 && vm_status == 0 && package_status == 0))
