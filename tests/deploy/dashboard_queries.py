"""What the dashboard and the alert rules query: their PromQL expressions and the
blk_* metric names in them. Shared by check_dashboard.py and check_metrics_exported.py."""
import json
import re

import yaml

# Grafana's built-in interval and our template variables, as Prometheus would see them.
SUBSTITUTIONS = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$node": ".*",
    "$volume": ".*",
}
LABEL_VALUES = re.compile(r"^label_values\((?:(.*),\s*)?([A-Za-z_][A-Za-z0-9_]*)\)$", re.S)
METRIC_NAME = re.compile(r"(?<![A-Za-z0-9_:.])blk_[A-Za-z0-9_:]*")


def load_dashboard(path):
    with open(path) as f:
        return json.load(f)


def all_panels(dashboard):
    """Every panel, including those nested in collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def variable_query(variable):
    query = variable.get("query", "")
    return query.get("query", "") if isinstance(query, dict) else query


def dashboard_queries(dashboard):
    """(where, PromQL) for every panel target and query variable; label_values(SEL, l)
    contributes its selector SEL."""
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            yield "panel %r target %s" % (panel.get("title"), target.get("refId")), \
                target.get("expr", "")
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable_query(variable)
        match = LABEL_VALUES.match(query.strip())
        if match:
            if match.group(1):
                yield "variable %s" % variable["name"], match.group(1)
        else:
            yield "variable %s" % variable["name"], query


def rule_queries(rules_path):
    with open(rules_path) as f:
        rules = yaml.safe_load(f)
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            name = rule.get("alert") or rule.get("record")
            yield "rule %s" % name, str(rule.get("expr", ""))


def as_promql(expr):
    for variable, value in SUBSTITUTIONS.items():
        expr = expr.replace(variable, value)
    return expr


def metric_names(expr):
    return set(METRIC_NAME.findall(expr))
