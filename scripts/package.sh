#!/usr/bin/env bash
# Builds the Debian package (build/package/blk_VERSION_amd64.deb: deploy/debian/CMakeLists.txt),
# fails on any lintian error, and installs it into a fresh Debian chroot where its binaries must
# run (tests/deploy/package_chroot_test.sh). Installs help2man, lintian and mmdebstrap first.
# Needs root (the chroot) and the Debian mirror this machine's apt uses.
# Usage: scripts/package.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BLK_BUILD_DIR:-$root/build}"

# shellcheck source=scripts/lib/packaging.sh
source "$root/scripts/lib/packaging.sh"
"$root/scripts/setup.sh"
install_tools help2man lintian mmdebstrap
"$root/scripts/build.sh" deb
deb="$(package_path "$build")"
echo "package: lintian $deb"
lintian_status=0
lintian --fail-on error "$deb" >"$build/package/lintian.txt" 2>&1 || lintian_status=$?
grep -v '^running with root privileges' "$build/package/lintian.txt" || true
((lintian_status == 0)) || {
  echo "package: lintian found errors (above)" >&2
  exit 1
}
"$root/tests/deploy/package_chroot_test.sh" "$deb"
echo "package: $deb"
