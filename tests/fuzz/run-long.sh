#!/bin/bash
# Runs every libFuzzer target of a build for a while (10 minutes each by default; not part of CI)
# and merges the inputs that reached new code into the repo's seed corpus,
# tests/fuzz/corpus/<target>/. Crashes are kept as BUILD/fuzz-long/<target>/crash-*; the script
# exits non-zero if any target found one.
#   tests/fuzz/run-long.sh BUILD [SECONDS] [TARGET...]   (BUILD: build-asan, where they are built)
set -u
if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
build=$(realpath "$1")
seconds=${2:-600}
shift $(($# < 2 ? $# : 2))
here=$(cd "$(dirname "$0")" && pwd)
if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  targets=()
  for corpus in "$here"/corpus/*/; do targets+=("$(basename "$corpus")"); done
fi

failed=()
for target in "${targets[@]}"; do
  binary=$build/bin/$target
  corpus=$here/corpus/$target
  if [[ ! -x $binary ]]; then
    echo "$target: $binary is missing (the fuzz targets are built in the ASan tree: scripts/sanitize.sh asan build, then pass build-asan)" >&2
    failed+=("$target")
    continue
  fi
  work=$build/fuzz-long/$target
  rm -rf "$work"
  mkdir -p "$work/new" "$corpus"
  echo "== $target: ${seconds}s"
  # New inputs go to work/new; the repo corpus is only read, then merged into below.
  if ! "$binary" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$work/" \
      "$work/new" "$corpus" >"$work/log" 2>&1; then
    echo "$target: FAILED, see $work/log and $work/crash-*" >&2
    tail -n 30 "$work/log" >&2
    failed+=("$target")
  fi
  grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$work/log" || true
  before=$(find "$corpus" -type f | wc -l)
  "$binary" -merge=1 "$corpus" "$work/new" >"$work/merge.log" 2>&1
  after=$(find "$corpus" -type f | wc -l)
  echo "$target: corpus $before -> $after inputs"
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
echo "all ${#targets[@]} targets ran ${seconds}s without a finding"
