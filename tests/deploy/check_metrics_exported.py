#!/usr/bin/env python3
"""Usage: check_metrics_exported.py [--declared-only] [--may-be-empty NAME]...
                                   SCRAPE DASHBOARD_JSON RULES_YAML...

Every blk_* metric the dashboard (panel targets, variables) and the alert rules query
must be in SCRAPE, a real scrape of the agent's /metrics: a family with at least one
series. Histogram references (_bucket, _sum, _count) count as their family.
--declared-only: a family only needs its # TYPE line (a scrape without volumes).
--may-be-empty NAME: NAME needs only its # TYPE line (e.g. a feature the kernel lacks).
Lists every missing metric and where it is queried; exits 1 if any is missing."""
import argparse
import re
import sys

from dashboard_queries import dashboard_queries, load_dashboard, metric_names, rule_queries

SUFFIXES = ("_bucket", "_sum", "_count")
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{|\s)")


def parse_scrape(text):
    """{family: type} from the # TYPE lines, and the set of families with a series."""
    types = {}
    with_series = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            types[name] = kind.strip()
            continue
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        if not match:
            continue
        name = match.group(1)
        if name not in types:
            for suffix in SUFFIXES:
                base = name[: -len(suffix)]
                if name.endswith(suffix) and types.get(base) in ("histogram", "summary"):
                    name = base
                    break
        with_series.add(name)
    return types, with_series


def family_of(name, types):
    """The family a queried name belongs to: foo_bucket is foo when foo is a histogram
    (or, when the scrape does not know either, still foo)."""
    if name in types:
        return name
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def queried_names(dashboard_path, rules_paths):
    """{metric name: [where it is queried]}"""
    names = {}
    queries = list(dashboard_queries(load_dashboard(dashboard_path)))
    for rules_path in rules_paths:
        queries += list(rule_queries(rules_path))
    for where, expr in queries:
        for name in metric_names(expr):
            names.setdefault(name, []).append(where)
    return names


def missing_metrics(scrape_text, names, declared_only=False, may_be_empty=()):
    """[(family, problem, [where])] for each queried family the scrape lacks."""
    types, with_series = parse_scrape(scrape_text)
    by_family = {}
    for name, wheres in names.items():
        by_family.setdefault(family_of(name, types), []).extend(wheres)
    missing = []
    for family, wheres in sorted(by_family.items()):
        if family not in types:
            missing.append((family, "not exported", wheres))
        elif not declared_only and family not in may_be_empty and family not in with_series:
            missing.append((family, "exported without any series", wheres))
    return missing


def main():
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("--declared-only", action="store_true")
    parser.add_argument("--may-be-empty", action="append", default=[])
    parser.add_argument("scrape")
    parser.add_argument("dashboard")
    parser.add_argument("rules", nargs="+")
    args = parser.parse_args()
    with open(args.scrape) as f:
        scrape_text = f.read()
    names = queried_names(args.dashboard, args.rules)
    if not names:
        sys.exit("FAIL: the dashboard and rules query no blk_* metric at all")
    missing = missing_metrics(scrape_text, names, args.declared_only, args.may_be_empty)
    for family, problem, wheres in missing:
        print("MISSING: %s (%s); queried by %s" % (family, problem, ", ".join(sorted(set(wheres)))),
              file=sys.stderr)
    if missing:
        sys.exit("FAIL: %d of the queried metrics are missing from %s"
                 % (len(missing), args.scrape))
    families = sorted({family_of(n, parse_scrape(scrape_text)[0]) for n in names})
    print("ok: all %d queried metric families are in the scrape: %s"
          % (len(families), " ".join(families)))


if __name__ == "__main__":
    main()
