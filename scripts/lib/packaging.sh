# shellcheck shell=bash
# What the Debian package's scripts share (scripts/package.sh, deploy/image/build.sh,
# tests/deploy/package_chroot_test.sh). Sourced.
#   install_tools TOOL...              apt-installs those of the Debian packages named that are
#                                      missing (each tool is its package's name)
#   package_path BUILD                 the path `ninja -C BUILD deb` writes the package to
#   root_with_package DEB TARGET [PACKAGE...]
#                                      a fresh bookworm root (mmdebstrap, variant minbase, from the
#                                      mirror this machine's apt uses) at TARGET, a directory or a
#                                      .tar, in which apt installed DEB with its dependencies and
#                                      the PACKAGEs, its apt caches and lists emptied; retried
declare -F log >/dev/null || log() { echo "packaging: $*" >&2; }
packaging_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/vm/debian_apt.sh
source "$packaging_dir/../../tests/vm/debian_apt.sh"

install_tools() {
  local tool missing=() sudo_cmd=()
  for tool in "$@"; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  ((${#missing[@]} > 0)) || return 0
  ((EUID == 0)) || sudo_cmd=(sudo)
  echo "packaging: installing ${missing[*]}" >&2
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

package_path() {
  local version
  version="$(sed -n 's/^project(blk VERSION \([0-9.]*\).*/\1/p' "$packaging_dir/../../CMakeLists.txt")"
  echo "$1/package/blk_${version}_$(dpkg --print-architecture).deb"
}

root_with_package() {
  local deb="$1" target="$2" includes mirror
  shift 2
  includes="$(IFS=,; echo "$*")"
  mirror="$(find_mirror)"
  # shellcheck disable=SC2317,SC2016 # called by retry; the hooks expand $1 in mmdebstrap's shell
  one_root() {
    rm -rf "$target"
    mmdebstrap --quiet --variant=minbase ${includes:+--include="$includes"} \
      --customize-hook="copy-in $deb /tmp" \
      --customize-hook="chroot \"\$1\" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/$(basename "$deb")" \
      --customize-hook='rm -rf "$1"/tmp/*.deb "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
      bookworm "$target" "$mirror"
  }
  retry one_root
}
