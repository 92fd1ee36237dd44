#!/usr/bin/env bash
# Runs clang-tidy with the repository's .clang-tidy (every finding an error) on the C++ sources the
# build compiles, as BUILD/compile_commands.json lists them; generated sources (proto) are left
# out. With --changed, only the sources changed since the merge base with origin (the ref in
# BLK_TIDY_BASE, else origin/HEAD, origin/main or main), uncommitted changes included; a changed
# header brings in its .cc. With --since-clean, only the sources changed since the commit named in
# .ci/tidy-clean-at, the last commit a whole-tree run found clean (CI uses this: a whole tree
# takes ~25 minutes on 2 cores), or since the later clean point this machine recorded itself
# (BLK_TIDY_CLEAN_CACHE); a change to .clang-tidy since then means the whole tree. After a
# clean whole-tree run, record it for every machine: git rev-parse HEAD >.ci/tidy-clean-at.
# BUILD is a configured build dir that compiles each source alone (not CMAKE_UNITY_BUILD); this
# script builds only its generated headers (proto, BPF skeleton), no objects.
# Usage: tests/clang_tidy.sh BUILD [--changed|--since-clean]
set -euo pipefail
if (($# < 1 || $# > 2)) || { (($# == 2)) && [[ $2 != --changed && $2 != --since-clean ]]; }; then
  echo "usage: $0 BUILD [--changed|--since-clean]" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$1" && pwd)"
mode="${2:---whole}"
tidy="$(command -v clang-tidy-14 || command -v clang-tidy || true)"
if [[ -z $tidy ]]; then
  echo "clang-tidy: not installed (scripts/setup.sh installs it)" >&2
  exit 2
fi
if [[ ! -f $build/compile_commands.json ]]; then
  echo "clang-tidy: $build/compile_commands.json missing: configure $build with CMake first" >&2
  exit 2
fi
if grep -q '/Unity/unity_' "$build/compile_commands.json"; then
  echo "clang-tidy: $build is a unity build (CMAKE_UNITY_BUILD): configure one without it" >&2
  exit 2
fi
cd "$root"

mapfile -t generated_headers < <(ninja -C "$build" -t targets all |
  sed -n -E 's/^([^/][^:]*\.h): CUSTOM_COMMAND$/\1/p')
if ((${#generated_headers[@]} > 0)); then
  ninja -C "$build" "${generated_headers[@]}" >/dev/null
fi

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
base=""
# The machine's own clean point, moved forward by every clean --since-clean or whole run (CI's
# included, whose clones come and go): used instead of .ci/tidy-clean-at when it is a later commit
# of this history.
clean_cache="${BLK_TIDY_CLEAN_CACHE:-/var/cache/blk-ci/tidy-clean-at}"
if [[ $mode == --since-clean ]]; then
  base="$(tr -d '[:space:]' <.ci/tidy-clean-at 2>/dev/null || true)"
  cached="$(tr -d '[:space:]' <"$clean_cache" 2>/dev/null || true)"
  if [[ -n $cached ]] && git rev-parse -q --verify "$cached^{commit}" >/dev/null &&
    git merge-base --is-ancestor "$cached" HEAD &&
    { ! git rev-parse -q --verify "$base^{commit}" >/dev/null ||
      git merge-base --is-ancestor "$base" "$cached"; }; then
    echo "clang-tidy: since $cached, this machine's last clean point ($clean_cache)"
    base="$cached"
  fi
  if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
    echo "clang-tidy: .ci/tidy-clean-at names no commit of this clone ('$base'): whole tree"
    mode=--whole
  elif ! git diff --quiet "$base" -- .clang-tidy; then
    echo "clang-tidy: .clang-tidy changed since $base: whole tree"
    mode=--whole
  fi
fi
if [[ $mode == --changed ]]; then
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
  base="$(git merge-base "$base" HEAD)"
fi
if [[ $mode != --whole ]]; then
  while IFS= read -r path; do
    case "$path" in
      *.cc) candidates+=("$path") ;;
      *.h) [[ -f ${path%.h}.cc ]] && candidates+=("${path%.h}.cc") ;;
    esac
  done < <(git diff --name-only --diff-filter=d "$base" -- '*.cc' '*.h')
else
  mapfile -t candidates < <(git ls-files '*.cc')
fi

# The commit the sources were read at: a commit made while the check runs is not covered by it.
checked_head="$(git rev-parse HEAD)"
files=()
for path in "${candidates[@]}"; do
  for known in "${compiled[@]}"; do
    if [[ $path == "$known" ]]; then
      files+=("$path")
      break
    fi
  done
done
# A clean check of a committed tree (nothing changed beside HEAD) makes the commit it read the clean
# point.
record_clean_point() {
  [[ $mode == --changed ]] && return 0
  [[ -z "$(git status --porcelain -- '*.cc' '*.h' .clang-tidy)" ]] || return 0
  mkdir -p "$(dirname "$clean_cache")" 2>/dev/null &&
    echo "$checked_head" >"$clean_cache.tmp" 2>/dev/null && mv "$clean_cache.tmp" "$clean_cache" ||
    echo "clang-tidy: could not record the clean point in $clean_cache"
  return 0
}

if ((${#files[@]} == 0)); then
  echo "clang-tidy: no compiled source to check (${mode#--})"
  record_clean_point
  exit 0
fi
mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)

# Headers are checked where the tree's own sources include them, never system or generated ones
# (the build dir may sit inside the tree: build/proto/gen/...).
header_filter="^$root/(agent|cli|client|common|csi|server|tests)/"
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
echo "clang-tidy: ${#files[@]} files clean (${mode#--}, ${elapsed}s)"
record_clean_point
