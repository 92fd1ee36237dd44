#!/usr/bin/env bash
# Usage: tests/bench/fetch-kublk.sh [--refresh] [newest]
#
# Builds kublk, the kernel's own ublk server (tools/testing/selftests/ublk),
# unmodified, from Debian packages only, and prints the directory holding:
#   kublk     the binary (liburing linked in statically: the guest runs the
#             host's root, whose liburing may be older)
#   versions  which packages it was built from
# Sources:
#   - the linux-source-X.Y package of the VM kernel's suite, at the version of
#     the kernel tests/vm/fetch-kernel.sh caches (only the ublk selftest's
#     sources are extracted from its tarball)
#   - that suite's linux-libc-dev at the same version: the kernel's uapi headers
#   - liburing-dev from BLK_KUBLK_URING_SUITE (default trixie: the host's own
#     may be too old for kublk)
# The packages are downloaded through a private apt (tests/vm/debian_apt.sh)
# and extracted with dpkg-deb, never installed. A complete cache built for the
# cached kernel is reused without touching the network; --refresh (or
# BLK_VM_REFRESH=1) rebuilds it. Only `newest` (7.x) has kublk; 6.12 has not.
#
# Environment:
#   BLK_VM_CACHE           cache root (default /var/cache/blk-vm)
#   BLK_VM_MIRROR          Debian mirror (default: the one this machine's apt uses)
#   BLK_KUBLK_URING_SUITE  the suite liburing comes from (default trixie)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() {
  echo "fetch-kublk: $*" >&2
  exit 1
}
log() { echo "fetch-kublk: $*" >&2; }

refresh="${BLK_VM_REFRESH:-0}"
flavour=newest
for arg in "$@"; do
  case "$arg" in
    --refresh) refresh=1 ;;
    newest) flavour="$arg" ;;
    lts) die "the lts kernel (6.12) has no kublk (tools/testing/selftests/ublk came in 6.15)" ;;
    -h | --help)
      sed -n '2,/^# shellcheck source-path/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$arg' (want newest)" ;;
  esac
done
kernel_suite=trixie-backports
uring_suite="${BLK_KUBLK_URING_SUITE:-trixie}"

for tool in apt-get apt-cache dpkg-deb tar xz gcc flock; do
  command -v "$tool" >/dev/null || die "'$tool' not found (run scripts/setup.sh)"
done

kernel_dir="$("$here/../vm/fetch-kernel.sh" "$flavour")" || die "cannot fetch the $flavour kernel"
release="$(cat "$kernel_dir/version")"
kernel_package="$(cat "$kernel_dir/package")"

cache_root="${BLK_VM_CACHE:-/var/cache/blk-vm}"
flavour_dir="$cache_root/$flavour"
kublk_dir="$flavour_dir/kublk"
exec 9>"$flavour_dir/.kublk.lock"
flock -w 1800 9 || die "timed out waiting for the lock on $flavour_dir/.kublk.lock"

if [[ "$refresh" != 1 && -x "$kublk_dir/kublk" &&
  "$(cat "$kublk_dir/kernel-package" 2>/dev/null)" == "$kernel_package" ]]; then
  log "$(cat "$kublk_dir/versions")"
  echo "$kublk_dir"
  exit 0
fi

# shellcheck source=../vm/debian_apt.sh
source "$here/../vm/debian_apt.sh"

# download SUITE PACKAGE[=VERSION]...: the .debs into $flavour_dir/kublk-apt/SUITE/debs.
download() {
  local suite="$1" dir="$flavour_dir/kublk-apt/$1"
  shift
  private_apt "$dir" "$suite"
  log "downloading $* from $suite on $mirror"
  retry apt-get -q "${apt_opts[@]}" update >&2 || die "apt-get update of $suite failed"
  rm -f "$dir"/debs/*.deb
  (cd "$dir/debs" && retry apt-get -q "${apt_opts[@]}" download "$@" >&2) ||
    die "apt-get download $* from $suite failed (has the mirror dropped $kernel_package? try fetch-kernel.sh --refresh)"
}

# 7.3.4+deb13-amd64 -> 7.3
series="$(grep -oE '^[0-9]+\.[0-9]+' <<<"$release")"
source_package="linux-source-$series"
download "$kernel_suite" "$source_package=$kernel_package" "linux-libc-dev=$kernel_package"
download "$uring_suite" liburing-dev
kernel_debs="$flavour_dir/kublk-apt/$kernel_suite/debs"
uring_deb="$(echo "$flavour_dir/kublk-apt/$uring_suite"/debs/liburing-dev_*.deb)"
uring_version="$(dpkg-deb -f "$uring_deb" Version)"

staging="$(mktemp -d "$flavour_dir/kublk.tmp.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
chmod 0755 "$staging"

# The source tarball is ~170 MB of xz: stream it and keep only the selftest.
log "extracting tools/testing/selftests/ublk from $source_package $kernel_package"
mkdir -p "$staging/src"
dpkg-deb --fsys-tarfile "$kernel_debs/${source_package}_"*.deb |
  tar -xO "./usr/src/$source_package.tar.xz" |
  tar -xJ -C "$staging/src" --strip-components=5 --wildcards \
    "$source_package/tools/testing/selftests/ublk/*.[ch]" \
    "$source_package/tools/testing/selftests/ublk/Makefile" ||
  die "$source_package has no tools/testing/selftests/ublk"
[[ -f "$staging/src/kublk.c" ]] || die "$source_package has no tools/testing/selftests/ublk/kublk.c"
dpkg-deb -x "$kernel_debs"/linux-libc-dev_*.deb "$staging/uapi"
dpkg-deb -x "$uring_deb" "$staging/uring"

# What the selftest's Makefile does (CFLAGS, LDLIBS; every .c but the standalone
# metadata_size.c), with the uapi headers of linux-libc-dev standing in for the
# tree's usr/include and liburing's static library.
multiarch="$(gcc -print-multiarch)"
uring_lib="$(find "$staging/uring" -name liburing.a | head -n1)"
[[ -n "$uring_lib" ]] || die "liburing-dev $uring_version has no liburing.a"
mapfile -t sources < <(find "$staging/src" -maxdepth 1 -name '*.c' ! -name metadata_size.c | sort)
log "compiling kublk (${#sources[@]} files) against liburing $uring_version"
gcc -O3 -Wall -D_GNU_SOURCE= -o "$staging/kublk" \
  -I "$staging/uring/usr/include" \
  -I "$staging/uapi/usr/include" -I "$staging/uapi/usr/include/$multiarch" \
  "${sources[@]}" "$uring_lib" -lpthread -lm >"$staging/build.log" 2>&1 ||
  die "compiling kublk failed: $(tail -n 20 "$staging/build.log")"
# kublk --help prints its usage and exits non-zero.
usage="$("$staging/kublk" --help 2>&1 || true)"
grep -q 'add -t' <<<"$usage" || die "the built kublk does not run on this host: $usage"

echo "$kernel_package" >"$staging/kernel-package"
echo "kublk from $source_package $kernel_package (uapi: linux-libc-dev $kernel_package," \
  "$kernel_suite), liburing-dev $uring_version ($uring_suite), static" >"$staging/versions"
rm -rf "$staging/src" "$staging/uapi" "$staging/uring"

if [[ -d "$kublk_dir" ]]; then
  mv "$kublk_dir" "$kublk_dir.old.$$"
fi
mv "$staging" "$kublk_dir"
trap - EXIT
rm -rf "$kublk_dir.old.$$" "$flavour_dir"/kublk-apt/*/debs/*.deb
log "$(cat "$kublk_dir/versions")"
echo "$kublk_dir"
