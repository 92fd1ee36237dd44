# shellcheck shell=bash disable=SC2034  # mirror and apt_opts are for the sourcing script
# A private apt for one Debian suite, shared by fetch-kernel.sh and
# tests/bench/fetch-kublk.sh. Sourced; the sourcing script defines log().
#   private_apt DIR SUITE   writes DIR/sources.list for SUITE on the mirror this
#                           machine uses and sets apt_opts: its own sources,
#                           lists, package cache and an empty dpkg status, so
#                           neither the machine's apt config nor its installed
#                           packages play any part. Packages are downloaded,
#                           never installed.
#   retry CMD...            runs CMD up to 4 times, backing off
#
# Environment: BLK_VM_MIRROR  Debian mirror (default: the one this machine's apt uses)

# The mirror this machine already uses: deb822 sources first, then one-line ones.
find_mirror() {
  if [[ -n "${BLK_VM_MIRROR:-}" ]]; then
    echo "$BLK_VM_MIRROR"
    return
  fi
  local uri
  uri="$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  if [[ -z "$uri" ]]; then
    uri="$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/ && $i !~ /security/) { print $i; exit } }' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)"
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

private_apt() {
  local dir="$1" suite="$2"
  mirror="$(find_mirror)"
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/debs" "$dir/preferences.d"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" \
    >"$dir/sources.list"
  : >"$dir/status"
  apt_opts=(
    -o "Dir::Etc::sourcelist=$dir/sources.list"
    -o "Dir::Etc::sourceparts=-"
    -o "Dir::Etc::preferences=$dir/status"
    -o "Dir::Etc::preferencesparts=$dir/preferences.d"
    -o "Dir::State::Lists=$dir/lists"
    -o "Dir::State::status=$dir/status"
    -o "Dir::Cache=$dir/cache"
    -o "APT::Sandbox::User=root"
    -o "Acquire::Retries=3"
  )
}

retry() {
  local attempt
  for attempt in 1 2 3 4; do
    if "$@"; then
      return 0
    fi
    log "attempt $attempt of '$*' failed"
    sleep $((attempt * 5))
  done
  return 1
}
