#!/usr/bin/env bash
# Usage: generated_file_current_test.sh GENERATOR COMMITTED_FILE
# The committed file is what its generator prints now (e.g. the Grafana ConfigMap from
# the dashboard JSON).
set -euo pipefail
generator="$1" committed="$2"
if ! diff -u "$committed" <("$generator"); then
  echo "FAIL: $committed is stale; run $generator > $committed" >&2
  exit 1
fi
echo "ok: $committed is what $generator prints"
