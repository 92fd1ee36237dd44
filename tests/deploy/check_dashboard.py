#!/usr/bin/env python3
"""Usage: check_dashboard.py DASHBOARD_JSON

The Grafana dashboard is well formed: it parses; the data source is the variable
${datasource} (type prometheus) on every panel, target and query variable; the node and
volume variables exist and are multi-select; panel ids are unique; every variable a query
uses is defined; and every PromQL expression parses (promtool check rules on them)."""
import os
import re
import subprocess
import sys
import tempfile

import yaml

from dashboard_queries import (all_panels, as_promql, dashboard_queries, load_dashboard,
                               variable_query)

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
VARIABLE_USE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def check(dashboard):
    errors = []
    if not isinstance(dashboard.get("schemaVersion"), int):
        errors.append("schemaVersion missing or not a number")
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    source = variables.get("datasource", {})
    if source.get("type") != "datasource" or source.get("query") != "prometheus":
        errors.append("no variable 'datasource' of type datasource for prometheus")
    for name, label in (("node", "instance"), ("volume", "volume")):
        variable = variables.get(name)
        if variable is None:
            errors.append("no variable %r" % name)
            continue
        if not variable.get("multi") or not variable.get("includeAll"):
            errors.append("variable %r is not multi-select with All" % name)
        if not variable_query(variable).rstrip().endswith(", %s)" % label):
            errors.append("variable %r does not list label %r" % (name, label))
    if "label_values(blk_volume_info" not in variable_query(variables.get("volume", {})):
        errors.append("variable 'volume' does not come from blk_volume_info")
    for name, variable in variables.items():
        if variable.get("type") == "query" and variable.get("datasource") != DATASOURCE:
            errors.append("variable %r: datasource is %r, want %r"
                          % (name, variable.get("datasource"), DATASOURCE))

    ids = set()
    for panel in all_panels(dashboard):
        title = panel.get("title")
        if panel.get("id") in ids:
            errors.append("panel %r: id %r used twice" % (title, panel.get("id")))
        ids.add(panel.get("id"))
        if "gridPos" not in panel:
            errors.append("panel %r: no gridPos" % title)
        if panel.get("type") == "row":
            continue
        if panel.get("datasource") != DATASOURCE:
            errors.append("panel %r: datasource is %r, want %r"
                          % (title, panel.get("datasource"), DATASOURCE))
        if not panel.get("targets"):
            errors.append("panel %r: no targets" % title)
        for target in panel.get("targets", []):
            if target.get("datasource") != DATASOURCE:
                errors.append("panel %r target %s: datasource is %r, want %r"
                              % (title, target.get("refId"), target.get("datasource"),
                                 DATASOURCE))
            if not target.get("expr"):
                errors.append("panel %r target %s: no expr" % (title, target.get("refId")))

    queries = list(dashboard_queries(dashboard))
    for where, expr in queries:
        for used in VARIABLE_USE.findall(expr):
            if not used.startswith("__") and used not in variables:
                errors.append("%s uses undefined variable $%s" % (where, used))
    errors += promql_errors(queries)
    return errors


def promtool_check(exprs):
    """promtool check rules over EXPRS as recording rules: (ok, its output)."""
    rules = [{"record": "dashboard:query_%d" % i, "expr": as_promql(expr)}
             for i, expr in enumerate(exprs)]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
        path = f.name
    try:
        result = subprocess.run(["promtool", "check", "rules", path], capture_output=True,
                                text=True)
    finally:
        os.unlink(path)
    return result.returncode == 0, (result.stdout + result.stderr).strip()


def promql_errors(queries):
    """Every query must parse; on a failure each is checked alone to name the culprit."""
    if promtool_check([expr for _, expr in queries])[0]:
        return []
    errors = []
    for where, expr in queries:
        ok, output = promtool_check([expr])
        if not ok:
            errors.append("%s: promtool rejects %r:\n%s" % (where, expr, output))
    return errors or ["promtool rejects the queries together but none alone"]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    errors = check(load_dashboard(sys.argv[1]))
    for error in errors:
        print("FAIL:", error, file=sys.stderr)
    if errors:
        sys.exit(1)
    print("ok: %s" % sys.argv[1])


if __name__ == "__main__":
    main()
