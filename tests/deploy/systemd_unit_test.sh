#!/usr/bin/env bash
# deploy/systemd/blkagent.service: `systemd-analyze verify` finds nothing to say about it, and
# `systemd-analyze security --offline=yes` rates its exposure at most MAX_EXPOSURE (tenths, as
# --threshold takes it: 33 = 3.3). verify wants the ExecStart binary to exist, so a copy of the
# unit runs the build's blkagent.
#
# systemd_unit_test.sh UNIT BLKAGENT MAX_EXPOSURE
set -euo pipefail
unit="$1" blkagent="$2" max_exposure="$3"

if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not found (Debian package systemd, scripts/setup.sh)"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
copy="$work/$(basename "$unit")"
sed "s,^ExecStart=/usr/local/bin/blkagent ,ExecStart=$blkagent ," "$unit" >"$copy"
grep -q "^ExecStart=$blkagent " "$copy" || { echo "FAIL - no ExecStart=/usr/local/bin/blkagent in $unit"; exit 1; }

# The Debian package's drop-in beside it (the groups the socket admits), verified with it.
mkdir -p "$copy.d"
cp "$(dirname "$0")/../../deploy/debian/groups.conf" "$copy.d/"

failures=0
# Members of --admin-group/--reader-group reach the socket only through a searchable directory.
mode="$(sed -n 's/^RuntimeDirectoryMode=//p' "$unit")"
if [[ "$mode" =~ ^0?[0-7][0-7][1357]$ ]]; then echo "ok   - RuntimeDirectoryMode=$mode lets the groups reach the socket"; else
  echo "FAIL - RuntimeDirectoryMode=${mode:-unset}: the socket's groups cannot search the directory"
  failures=$((failures + 1))
fi
rc=0
verify="$(systemd-analyze verify "$copy" 2>&1)" || rc=$?
if ((rc == 0)) && [[ -z "$verify" ]]; then echo "ok   - systemd-analyze verify"; else
  echo "FAIL - systemd-analyze verify (exit $rc):"; echo "$verify"; failures=$((failures + 1))
fi

rc=0
security="$(systemd-analyze security --offline=yes --threshold="$max_exposure" "$copy" 2>&1)" || rc=$?
score="$(grep -o 'Overall exposure level for .*' <<<"$security" || true)"
if ((rc == 0)) && [[ -n "$score" ]]; then echo "ok   - $score (at most $max_exposure/10)"; else
  echo "$security"; echo "FAIL - security (exit $rc): ${score:-no score} (at most $max_exposure/10)"
  failures=$((failures + 1))
fi
((failures == 0))
