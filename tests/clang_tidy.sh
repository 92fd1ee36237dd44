#!/usr/bin/env bash
# Runs clang-tidy with the repository's .clang-tidy (every finding an error) on the C++ sources the
# build compiles, as BUILD/compile_commands.json lists them; generated sources (proto) are left
# out. With --changed, only the sources changed since the merge base with origin (the ref in
# BLK_TIDY_BASE, else origin/HEAD, origin/main or main), uncommitted changes included; a changed
# header brings in its .cc. BUILD must have its generated headers built (proto, BPF skeleton).
# Usage: tests/clang_tidy.sh BUILD [--changed]
set -euo pipefail
if (($# < 1 || $# > 2)) || { (($# == 2)) && [[ $2 != --changed ]]; }; then
  echo "usage: $0 BUILD [--changed]" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$1" && pwd)"
changed=$((($# == 2)))
tidy="$(command -v clang-tidy-14 || command -v clang-tidy || true)"
if [[ -z $tidy ]]; then
  echo "clang-tidy: not installed (scripts/setup.sh installs it)" >&2
  exit 2
fi
if [[ ! -f $build/compile_commands.json ]]; then
  echo "clang-tidy: $build/compile_commands.json missing: configure $build with CMake first" >&2
  exit 2
fi
cd "$root"

# Repository-relative sources that the compile database names.
mapfile -t compiled < <(python3 - "$build/compile_commands.json" "$root" <<'PY'
import json, os, sys
root = sys.argv[2] + "/"
for entry in json.load(open(sys.argv[1])):
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    if path.startswith(root):
        print(path[len(root):])
PY
)

candidates=()
if ((changed)); then
  base="${BLK_TIDY_BASE:-}"
  if [[ -z $base ]]; then
    for ref in origin/HEAD origin/main main; do
      if git rev-parse -q --verify "$ref^{commit}" >/dev/null; then
        base="$ref"
        break
      fi
    done
  fi
  if [[ -z $base ]]; then
    echo "clang-tidy: --changed needs a base: set BLK_TIDY_BASE" >&2
    exit 2
  fi
  while IFS= read -r path; do
    case "$path" in
      *.cc) candidates+=("$path") ;;
      *.h) [[ -f ${path%.h}.cc ]] && candidates+=("${path%.h}.cc") ;;
    esac
  done < <(git diff --name-only --diff-filter=d "$(git merge-base "$base" HEAD)" -- '*.cc' '*.h')
else
  mapfile -t candidates < <(git ls-files '*.cc')
fi

files=()
for path in "${candidates[@]}"; do
  for known in "${compiled[@]}"; do
    if [[ $path == "$known" ]]; then
      files+=("$path")
      break
    fi
  done
done
if ((${#files[@]} == 0)); then
  echo "clang-tidy: no compiled source to check"
  exit 0
fi
mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)

# Headers are checked where the tree's own sources include them, never system or generated ones
# (the build dir may sit inside the tree: build/proto/gen/...).
header_filter="^$root/(agent|cli|server|tests|uri)/"
start=$SECONDS
# clang-tidy counts the warnings it suppressed in system headers ("N warnings generated."): noise.
set +e
printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "$(nproc)" "$tidy" -p "$build" --quiet --header-filter="$header_filter" 2>&1 |
  grep -v -E '^[0-9]+ warnings? generated\.$'
statuses=("${PIPESTATUS[@]}")
set -e
status=${statuses[1]}
elapsed=$((SECONDS - start))
if ((status != 0)); then
  echo "clang-tidy: findings in ${#files[@]} files checked (${elapsed}s)" >&2
  exit 1
fi
echo "clang-tidy: ${#files[@]} files clean (${elapsed}s)"
