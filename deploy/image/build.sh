#!/usr/bin/env bash
# Builds the node image blk:VERSION from this tree and Debian packages only, as an OCI archive:
# a Debian bookworm root file system (mmdebstrap, variant minbase) in which apt installs the
# project's own Debian package (deploy/debian: the three binaries in /usr/bin) with what it
# depends on, and the tools blk-csi runs (blkid, mkfs and grow tools of ext4 and xfs); umoci
# makes it an image whose entrypoint is blkagent (the DaemonSet names each container's command).
# Then tests/deploy/check_image.py checks the archive against the DaemonSet.
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
missing=()
for tool in help2man mmdebstrap umoci; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]} > 0)); then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
"$root/scripts/build.sh" deb
version="$(sed -n 's/^project(blk VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
[[ -n $version ]] || die "no project version in CMakeLists.txt"
deb="$build/package/blk_${version}_$(dpkg --print-architecture).deb"

rm -rf "$out"
mkdir -p "$out"
log() { echo "image: $*" >&2; }
# shellcheck source=tests/vm/debian_apt.sh
source "$root/tests/vm/debian_apt.sh"
mirror="$(find_mirror)"
# What blk-csi runs beyond the package's dependencies: xfs tools (the package recommends them).
echo "image: root file system (bookworm from $mirror) with $(basename "$deb")"
make_rootfs() {
  mmdebstrap --quiet --variant=minbase --include=xfsprogs,ca-certificates \
    --customize-hook="copy-in $deb /tmp" \
    --customize-hook="chroot \"\$1\" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/$(basename "$deb")" \
    --customize-hook='rm -rf "$1"/tmp/*.deb "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
    bookworm "$out/rootfs.tar" "$mirror" >/dev/null
}
retry make_rootfs

echo "image: OCI image blk:$version"
layout="$out/oci"
umoci init --layout "$layout"
umoci new --image "$layout:$version"
umoci unpack --image "$layout:$version" "$out/bundle" >/dev/null
tar -C "$out/bundle/rootfs" -xf "$out/rootfs.tar"
umoci repack --image "$layout:$version" "$out/bundle"
umoci config --image "$layout:$version" --author "blk" \
  --config.entrypoint /usr/bin/blkagent --config.user 0:0 --config.workingdir / \
  --config.label "org.opencontainers.image.title=blk" \
  --config.label "org.opencontainers.image.version=$version"
umoci gc --layout "$layout"
archive="$out/blk-$version.oci.tar"
tar -C "$layout" -cf "$archive" .
rm -rf "$out/bundle" "$out/rootfs.tar"
echo "image: $archive ($(du -h "$archive" | cut -f1))"
"$root/tests/deploy/check_image.py" "$archive" "$root/deploy/kubernetes/daemonset.yaml"
