#!/usr/bin/env bash
# Usage: configmap_current_test.sh SOURCE_DIR
# The committed Grafana ConfigMap is what make-configmap.sh makes of the dashboard JSON.
set -euo pipefail
grafana="$1/deploy/grafana"
if ! diff -u "$grafana/configmap.yaml" <("$grafana/make-configmap.sh"); then
  echo "FAIL: deploy/grafana/configmap.yaml is stale; run" \
    "deploy/grafana/make-configmap.sh > deploy/grafana/configmap.yaml" >&2
  exit 1
fi
echo "ok: configmap.yaml matches blk-dashboard.json"
