#!/usr/bin/env bash
# Builds the Debian package (build/package/blk_VERSION_amd64.deb: deploy/debian/CMakeLists.txt),
# fails on any lintian error, and installs it into a fresh Debian chroot where its binaries must
# run (tests/deploy/package_chroot_test.sh). Installs help2man, lintian and mmdebstrap first.
# Needs root (the chroot) and the Debian mirror this machine's apt uses.
# Usage: scripts/package.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BLK_BUILD_DIR:-$root/build}"

"$root/scripts/setup.sh"
missing=()
for tool in help2man lintian mmdebstrap; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]} > 0)); then
  echo "package: installing ${missing[*]}"
  sudo_cmd=()
  ((EUID == 0)) || sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
"$root/scripts/build.sh" deb
version="$(sed -n 's/^project(blk VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
deb="$build/package/blk_${version}_$(dpkg --print-architecture).deb"
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
