#!/usr/bin/env python3
"""Usage: check_dashboard_data.py [--may-be-empty NAME]... [--volume ID]...
                                 PROMETHEUS_URL DASHBOARD_JSON

Every panel of the dashboard shows data: each panel target and query variable,
evaluated by a real Prometheus that scrapes the agent (variables set to All), returns
at least one series. The volume variable must list each --volume ID. Queries on a
--may-be-empty metric (e.g. a feature the kernel lacks) are skipped."""
import argparse
import json
import sys
import urllib.parse
import urllib.request

from dashboard_queries import (LABEL_VALUES, as_promql, dashboard_queries, load_dashboard,
                               metric_names, variable_query)


def query(prometheus, expr):
    url = "%s/api/v1/query?%s" % (prometheus, urllib.parse.urlencode({"query": expr}))
    with urllib.request.urlopen(url, timeout=30) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError("Prometheus refused %r: %s" % (expr, body))
    return body["data"]["result"]


def main():
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("--may-be-empty", action="append", default=[])
    parser.add_argument("--volume", action="append", default=[])
    parser.add_argument("prometheus")
    parser.add_argument("dashboard")
    args = parser.parse_args()
    dashboard = load_dashboard(args.dashboard)

    problems = []
    checked = 0
    for where, expr in dashboard_queries(dashboard):
        skipped = metric_names(expr) & set(args.may_be_empty)
        if skipped:
            print("skipped: %s (on %s, which may be empty here)" % (where, ", ".join(skipped)))
            continue
        checked += 1
        try:
            result = query(args.prometheus, as_promql(expr))
        except (OSError, RuntimeError, ValueError) as error:
            problems.append("%s: %s" % (where, error))
            continue
        if not result:
            problems.append("%s: no data for %s" % (where, as_promql(expr)))

    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    match = LABEL_VALUES.match(variable_query(variables["volume"]).strip())
    selector, label = as_promql(match.group(1)), match.group(2)
    listed = {series["metric"].get(label) for series in query(args.prometheus, selector)}
    for volume in args.volume:
        if volume not in listed:
            problems.append("variable volume lists %s, not %s" % (sorted(listed), volume))

    for problem in problems:
        print("EMPTY:", problem, file=sys.stderr)
    if problems:
        sys.exit("FAIL: %d of %d dashboard queries show no data" % (len(problems), checked))
    print("ok: all %d dashboard queries return data; the volume variable lists %s"
          % (checked, " ".join(sorted(listed))))


if __name__ == "__main__":
    main()
