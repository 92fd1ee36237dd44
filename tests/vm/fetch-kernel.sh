#!/usr/bin/env bash
# Usage: tests/vm/fetch-kernel.sh [--refresh] {lts|newest}
#
# Downloads a Debian kernel that has ublk, extracts it (never installs it) and
# builds a busybox initramfs that can mount the host root over 9p. Prints the
# kernel directory, which holds:
#   vmlinuz          the kernel image
#   initramfs.cpio   busybox + the 9p modules + init (tests/vm/initramfs-init.sh)
#   root/            the extracted packages
#   modbase          path, relative to the kernel dir, to pass to `modprobe -d`
#   version          the kernel release (uname -r in the guest)
#   package          the Debian package version
#
#   lts     6.12 from bookworm-backports
#   newest  the newest kernel in trixie-backports (7.x)
#
# The version is resolved from the suite's linux-image-amd64 metapackage, so
# the script keeps working when the mirror drops old builds. A complete cache
# is reused without touching the network; --refresh (or BLK_VM_REFRESH=1)
# re-resolves the version and replaces the cache when the mirror has a newer
# one.
#
# Environment:
#   BLK_VM_CACHE   cache root (default /var/cache/blk-vm)
#   BLK_VM_MIRROR  Debian mirror (default: the one this machine's apt uses)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() {
  echo "fetch-kernel: $*" >&2
  exit 1
}
log() { echo "fetch-kernel: $*" >&2; }

refresh="${BLK_VM_REFRESH:-0}"
flavour=""
for arg in "$@"; do
  case "$arg" in
    --refresh) refresh=1 ;;
    lts | newest) flavour="$arg" ;;
    -h | --help)
      sed -n '2,/^# shellcheck source-path/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$arg' (want lts or newest)" ;;
  esac
done
[[ -n "$flavour" ]] || die "missing flavour (lts or newest)"

case "$flavour" in
  lts) suite=bookworm-backports ;;
  newest) suite=trixie-backports ;;
esac

for tool in apt-get apt-cache dpkg-deb depmod modprobe xz busybox flock; do
  command -v "$tool" >/dev/null || die "'$tool' not found (run scripts/setup.sh)"
done

cache_root="${BLK_VM_CACHE:-/var/cache/blk-vm}"
flavour_dir="$cache_root/$flavour"
kernel_dir="$flavour_dir/kernel"
apt_dir="$flavour_dir/apt"
mkdir -p "$flavour_dir" || die "cannot create $flavour_dir (set BLK_VM_CACHE)"

# One fetch per flavour at a time: two VM runs may start together.
exec 9>"$flavour_dir/.lock"
flock -w 1800 9 || die "timed out waiting for the lock on $flavour_dir"

init_script="$here/initramfs-init.sh"
init_hash="$(sha256sum <"$init_script" | cut -d' ' -f1)"

# Builds DIR/initramfs.cpio: busybox, /init, and the modules that mounting
# a 9p root needs, decompressed (busybox insmod cannot read .ko.xz), in
# dependency order. Renamed into place, so readers see the old or the new.
build_initramfs() {
  local dir="$1" modbase="$2" release="$3"
  local tree="$dir/initramfs.tree" conf="$dir/initramfs.modprobe.d" module name
  rm -rf "$tree" "$conf"
  mkdir -p "$tree"/{bin,dev,proc,sys,newroot,modules} "$conf"
  cp /bin/busybox "$tree/bin/busybox"
  cp "$init_script" "$tree/init"
  chmod 0755 "$tree/init"
  modprobe -C "$conf" -d "$modbase" -S "$release" --show-depends -a 9p 9pnet_virtio |
    awk '$1 == "insmod" && !seen[$2]++ { print $2 }' >"$dir/initramfs.load-order"
  [[ -s "$dir/initramfs.load-order" ]] || die "cannot resolve the 9p modules of $release"
  : >"$tree/modules/order"
  while read -r module; do
    name="$(basename "$module")"
    name="${name%.xz}"
    case "$module" in
      *.xz) xz -dc "$module" >"$tree/modules/$name" ;;
      *) cp "$module" "$tree/modules/$name" ;;
    esac
    echo "$name" >>"$tree/modules/order"
  done <"$dir/initramfs.load-order"
  (cd "$tree" && find . | busybox cpio -o -H newc 2>/dev/null >"$dir/initramfs.cpio.tmp")
  [[ -s "$dir/initramfs.cpio.tmp" ]] || die "packing the initramfs failed"
  mv "$dir/initramfs.cpio.tmp" "$dir/initramfs.cpio"
  echo "$init_hash" >"$dir/initramfs.init-sha256"
  rm -rf "$tree" "$conf" "$dir/initramfs.load-order"
}

cache_complete() {
  [[ -f "$kernel_dir/version" && -f "$kernel_dir/initramfs.cpio" && -e "$kernel_dir/vmlinuz" ]]
}

# A changed initramfs-init.sh needs only a new initramfs, not a new kernel.
refresh_initramfs() {
  if [[ "$(cat "$kernel_dir/initramfs.init-sha256" 2>/dev/null)" != "$init_hash" ]]; then
    log "initramfs-init.sh changed: rebuilding the $flavour initramfs"
    build_initramfs "$kernel_dir" "$kernel_dir/$(cat "$kernel_dir/modbase")" "$(cat "$kernel_dir/version")"
  fi
}

if cache_complete && [[ "$refresh" != 1 ]]; then
  refresh_initramfs
  echo "$kernel_dir"
  exit 0
fi

# shellcheck source=debian_apt.sh
source "$here/debian_apt.sh"
private_apt "$apt_dir" "$suite"

log "resolving the kernel in $suite from $mirror"
retry apt-get -q "${apt_opts[@]}" update >&2 || die "apt-get update of $suite failed"

depends_of() {
  apt-cache "${apt_opts[@]}" show --no-all-versions "$1" | awk -F': ' '$1 == "Depends" { print $2; exit }'
}

meta_depends="$(depends_of linux-image-amd64)" || die "linux-image-amd64 not found in $suite"
release="$(grep -oE 'linux-image-[0-9][^ ,]*' <<<"$meta_depends" | head -n1 | sed 's/^linux-image-//')"
[[ -n "$release" ]] || die "cannot find the kernel release in linux-image-amd64's Depends: $meta_depends"
package_version="$(apt-cache "${apt_opts[@]}" show --no-all-versions "linux-image-$release" |
  awk -F': ' '$1 == "Version" { print $2; exit }')"

if cache_complete && [[ "$(cat "$kernel_dir/version")" == "$release" ]]; then
  log "cache already holds $release"
  refresh_initramfs
  echo "$kernel_dir"
  exit 0
fi

# Since 7.x linux-image-VER is an empty package depending on
# linux-{binary,modules,base}-VER; up to 6.12 it holds everything itself.
image_depends="$(depends_of "linux-image-$release")"
mapfile -t packages < <(grep -oE "linux-(binary|modules|base)-${release//+/\\+}( |,|$)" <<<"$image_depends" |
  tr -d ' ,' | sort -u)
if ((${#packages[@]} == 0)); then
  packages=("linux-image-$release")
fi

log "downloading $release ($package_version): ${packages[*]}"
rm -f "$apt_dir"/debs/*.deb
(cd "$apt_dir/debs" && retry apt-get -q "${apt_opts[@]}" download "${packages[@]}" >&2) ||
  die "apt-get download ${packages[*]} failed"

staging="$(mktemp -d "$flavour_dir/kernel.tmp.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
chmod 0755 "$staging"
for deb in "$apt_dir"/debs/*.deb; do
  dpkg-deb -x "$deb" "$staging/root"
done

# Modules live in lib/modules (6.12) or usr/lib/modules (7.x, merged /usr).
modules_dir="$(find "$staging/root" -type d -path "*/lib/modules/$release" | head -n1)"
[[ -n "$modules_dir" ]] || die "no lib/modules/$release in ${packages[*]}"
modbase="${modules_dir%/lib/modules/"$release"}"
ublk_module="$(find "$modules_dir" -name 'ublk_drv.ko*' | head -n1)"
[[ -n "$ublk_module" ]] || die "$release has no ublk_drv module"
vmlinuz="$(find "$staging/root" \( -path "*/boot/vmlinuz-$release" -o -path "$modules_dir/vmlinuz" \) | head -n1)"
[[ -n "$vmlinuz" ]] || die "no vmlinuz for $release in ${packages[*]}"

# The packages ship no modules.dep.
depmod -b "$modbase" "$release"

build_initramfs "$staging" "$modbase" "$release"

ln -s "${vmlinuz#"$staging"/}" "$staging/vmlinuz"
echo "${modbase#"$staging"/}" >"$staging/modbase"
echo "$package_version" >"$staging/package"
echo "$release" >"$staging/version"

# Swap in the new tree in one rename, so a reader never sees half a kernel.
if [[ -d "$kernel_dir" ]]; then
  mv "$kernel_dir" "$kernel_dir.old.$$"
fi
mv "$staging" "$kernel_dir"
trap - EXIT
rm -rf "$kernel_dir.old.$$" "$apt_dir"/debs/*.deb
log "$flavour kernel $release ready ($(basename "$ublk_module") present)"
echo "$kernel_dir"
