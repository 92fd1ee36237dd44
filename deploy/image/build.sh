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

# shellcheck source=scripts/lib/packaging.sh
source "$root/scripts/lib/packaging.sh"
"$root/scripts/setup.sh"
install_tools help2man mmdebstrap umoci
"$root/scripts/build.sh" deb
deb="$(package_path "$build")"
version="$(dpkg-deb -f "$deb" Version)"

rm -rf "$out"
mkdir -p "$out"
log() { echo "image: $*" >&2; }
# What blk-csi runs beyond the package's dependencies: xfs tools (the package recommends them).
echo "image: root file system (bookworm) with $(basename "$deb")"
root_with_package "$deb" "$out/rootfs.tar" xfsprogs ca-certificates >/dev/null

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
