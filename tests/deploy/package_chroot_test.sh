#!/usr/bin/env bash
# The Debian package installs into a fresh Debian bookworm chroot (mmdebstrap, variant minbase,
# from the mirror this machine's apt uses) with apt resolving its dependencies; there the three
# binaries run (--version), the groups its socket admits exist, the unit runs the installed
# binary with them, and blkctl's completion loads. Then `apt-get purge` removes every file it
# installed and the agent's state directory. Needs root and the mirror.
# Usage: tests/deploy/package_chroot_test.sh DEB
set -euo pipefail
deb="$(readlink -f "${1:?usage: package_chroot_test.sh DEB}")"
here="$(cd "$(dirname "$0")" && pwd)"
((EUID == 0)) || { echo "SKIP: needs root (mmdebstrap makes a chroot)"; exit 77; }
command -v mmdebstrap >/dev/null || { echo "SKIP: mmdebstrap not installed"; exit 77; }
log() { echo "package: $*" >&2; }
# shellcheck source=scripts/lib/packaging.sh
source "$here/../../scripts/lib/packaging.sh"
work="$(mktemp -d /tmp/blk-package-chroot.XXXXXX)"
trap 'umount "$work/root/proc" 2>/dev/null; mountpoint -q "$work/root/proc" || rm -rf "$work"' EXIT
root="$work/root"

failures=0
check() { # check DESCRIPTION COMMAND...: runs COMMAND in the chroot
  local what="$1" output
  shift
  if output="$(chroot "$root" "$@" 2>&1)"; then
    echo "ok   - $what"
  else
    echo "FAIL - $what: $output"
    failures=$((failures + 1))
  fi
}

# apt in the chroot installs the package with its dependencies, as a user's would.
root_with_package "$deb" "$root"
# The binaries find their libraries by $ORIGIN, which glibc reads from /proc/self/exe.
mount -t proc proc "$root/proc"

version="$(dpkg-deb -f "$deb" Version)"
for binary in blkagent blkctl blk-csi; do
  check "$binary --version says $version" sh -c "$binary --version | grep -qF '$version'"
done
check "the groups blk-admin and blk-reader exist" getent group blk-admin blk-reader
for variable in BLKAGENT_GROUPS BLKAGENT_FILE_DIRS; do
  check "the unit runs /usr/bin/blkagent with \$$variable" grep -qE \
    "^ExecStart=/usr/bin/blkagent .* \\\$$variable( |\$)" /usr/lib/systemd/system/blkagent.service
done
check "its drop-in admits the groups" grep -q -- '--admin-group blk-admin --reader-group blk-reader' \
  /usr/lib/systemd/system/blkagent.service.d/groups.conf
check "blkctl's completion defines _blkctl" \
  bash -c 'source /usr/share/bash-completion/completions/blkctl && declare -F _blkctl'
check "man pages for the three" test -s /usr/share/man/man8/blkagent.8.gz \
  -a -s /usr/share/man/man1/blkctl.1.gz -a -s /usr/share/man/man8/blk-csi.8.gz

mkdir -p "$root/var/lib/blkagent/volumes"
check "apt-get purge blk" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q blk
check "purge left no file of the package" sh -c \
  '! test -e /usr/bin/blkagent -o -e /usr/lib/blk -o -e /usr/lib/systemd/system/blkagent.service'
check "purge removed the state directory" sh -c '! test -e /var/lib/blkagent'
((failures == 0)) || { echo "FAIL: $failures check(s)"; exit 1; }
echo "PASS"
