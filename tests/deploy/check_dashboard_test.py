#!/usr/bin/env python3
"""Unit tests of check_dashboard.py: each kind of mistake is caught (needs promtool)."""
import copy
import unittest

from check_dashboard import DATASOURCE, check


def variable(name, query):
    return {"name": name, "type": "query", "datasource": dict(DATASOURCE), "query": query,
            "multi": True, "includeAll": True}


GOOD = {
    "schemaVersion": 41,
    "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus"},
        variable("node", "label_values(blk_agent_build_info, instance)"),
        variable("volume", 'label_values(blk_volume_info{instance=~"$node"}, volume)'),
    ]},
    "panels": [
        {"type": "row", "id": 1, "title": "r", "gridPos": {}, "panels": []},
        {"type": "timeseries", "id": 2, "title": "IOPS", "gridPos": {},
         "datasource": dict(DATASOURCE),
         "targets": [{"refId": "A", "datasource": dict(DATASOURCE),
                      "expr": 'sum by (volume) (rate(blk_volume_ios_total{volume=~"$volume"}'
                              '[$__rate_interval]))'}]},
    ],
}


def broken(change):
    dashboard = copy.deepcopy(GOOD)
    change(dashboard)
    return check(dashboard)


class CheckDashboardTest(unittest.TestCase):
    def test_a_good_dashboard_passes(self):
        self.assertEqual(check(copy.deepcopy(GOOD)), [])

    def test_a_fixed_datasource_on_a_panel_or_target(self):
        def panel(d):
            d["panels"][1]["datasource"] = {"type": "prometheus", "uid": "prom-1"}

        def target(d):
            del d["panels"][1]["targets"][0]["datasource"]

        self.assertRegex(" ".join(broken(panel)), "panel 'IOPS': datasource")
        self.assertRegex(" ".join(broken(target)), "panel 'IOPS' target A: datasource")

    def test_missing_or_single_select_variables(self):
        def no_volume(d):
            del d["templating"]["list"][2]

        def single(d):
            d["templating"]["list"][1]["multi"] = False

        self.assertIn("no variable 'volume'", broken(no_volume))
        self.assertRegex(" ".join(broken(single)), "'node' is not multi-select")

    def test_an_undefined_variable(self):
        def use(d):
            d["panels"][1]["targets"][0]["expr"] = 'blk_volume_info{volume=~"$volumes"}'

        self.assertRegex(" ".join(broken(use)), r"undefined variable \$volumes")

    def test_promql_that_does_not_parse_names_its_panel(self):
        def bad(d):
            d["panels"][1]["targets"][0]["expr"] = "sum by (volume (blk_volume_ios_total)"

        errors = broken(bad)
        self.assertEqual(len(errors), 1)
        self.assertRegex(errors[0], "^panel 'IOPS' target A: promtool rejects")

    def test_duplicate_panel_ids(self):
        def dup(d):
            d["panels"][1]["id"] = 1

        self.assertRegex(" ".join(broken(dup)), "id 1 used twice")


if __name__ == "__main__":
    unittest.main()
