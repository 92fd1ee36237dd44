#!/usr/bin/env bash
# Builds the node image blk:VERSION from this tree and Debian packages only, as an OCI archive:
# a Debian bookworm root file system (mmdebstrap, variant minbase) holding the runtime libraries
# the binaries load (found from the binaries themselves: ldd, then dpkg -S) and the tools blk-csi
# runs (blkid, mkfs and grow tools of ext4 and xfs), plus blkagent, blkctl and blk-csi in
# /usr/local/bin and the project's own libraries in /usr/local/lib; umoci makes it an image whose
# entrypoint is blkagent (the DaemonSet names each container's command).
# Usage: deploy/image/build.sh [OUT_DIR]      (default: ${BLK_BUILD_DIR:-build}/image)
# Output: OUT_DIR/blk-VERSION.oci.tar, an OCI image archive (`skopeo copy oci-archive:FILE
# docker://REGISTRY/blk:VERSION`, `podman load -i FILE`, `ctr images import FILE`).
# Needs root (mmdebstrap's chroot, umoci unpack) and the Debian mirror this machine's apt uses
# (BLK_VM_MIRROR chooses another, as for the VM kernels).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BLK_BUILD_DIR:-$root/build}"
out="${1:-$build/image}"
die() {
  echo "image: $*" >&2
  exit 1
}
((EUID == 0)) || die "run as root (mmdebstrap and umoci unpack a root file system)"

"$root/scripts/setup.sh"
for tool in mmdebstrap umoci; do
  command -v "$tool" >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$tool" >/dev/null
  }
done
"$root/scripts/build.sh" blkagent blkctl blk-csi
version="$(sed -n 's/^project(blk VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
[[ -n $version ]] || die "no project version in CMakeLists.txt"

binaries=("$build/bin/blkagent" "$build/bin/blkctl" "$build/bin/blk-csi")
# Every library they load, resolved ($ORIGIN/../lib paths included): the project's own from the
# build tree, the rest from Debian packages.
mapfile -t loaded < <(ldd "${binaries[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
  xargs -r readlink -f | sort -u)
own_libraries=() system_libraries=()
for library in "${loaded[@]}"; do
  if [[ $library == "$(readlink -f "$build")"/* ]]; then
    own_libraries+=("$library")
  else
    system_libraries+=("$library")
  fi
done
packages=()
for library in "${system_libraries[@]}"; do
  owner=""
  for candidate in "$library" "${library#/usr}" "/usr$library"; do
    owner="$(dpkg -S "$candidate" 2>/dev/null | head -n 1 | cut -d: -f1)" && [[ -n $owner ]] && break
  done
  [[ -n $owner ]] || die "no Debian package owns $library (the binaries load it)"
  packages+=("$owner")
done
# What blk-csi runs: blkid (util-linux), mkfs.ext4 and resize2fs, mkfs.xfs and xfs_growfs.
packages+=(util-linux e2fsprogs xfsprogs ca-certificates)
include="$(printf '%s\n' "${packages[@]}" | sort -u | paste -sd, -)"

rm -rf "$out"
mkdir -p "$out"
log() { echo "image: $*" >&2; }
# shellcheck source=tests/vm/debian_apt.sh
source "$root/tests/vm/debian_apt.sh"
mirror="$(find_mirror)"
echo "image: root file system (bookworm from $mirror) with $include"
mmdebstrap --quiet --variant=minbase --include="$include" \
  --customize-hook='mkdir -p "$1/usr/local/bin" "$1/usr/local/lib"' \
  --customize-hook="copy-in ${binaries[*]} /usr/local/bin" \
  --customize-hook="copy-in ${own_libraries[*]} /usr/local/lib" \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
  bookworm "$out/rootfs.tar" "$mirror"

echo "image: OCI image blk:$version"
layout="$out/oci"
umoci init --layout "$layout"
umoci new --image "$layout:$version"
umoci unpack --image "$layout:$version" "$out/bundle" >/dev/null
tar -C "$out/bundle/rootfs" -xf "$out/rootfs.tar"
umoci repack --image "$layout:$version" "$out/bundle"
umoci config --image "$layout:$version" --author "blk" \
  --config.entrypoint /usr/local/bin/blkagent --config.user 0:0 --config.workingdir / \
  --config.label "org.opencontainers.image.title=blk" \
  --config.label "org.opencontainers.image.version=$version"
umoci gc --layout "$layout"
archive="$out/blk-$version.oci.tar"
tar -C "$layout" -cf "$archive" .
rm -rf "$out/bundle" "$out/rootfs.tar"
echo "image: $archive ($(du -h "$archive" | cut -f1))"
