#!/usr/bin/env python3
"""Unit tests of check_metrics_exported.py: it finds what a scrape lacks."""
import json
import os
import tempfile
import unittest

from check_metrics_exported import missing_metrics, parse_scrape, queried_names

SCRAPE = """\
# HELP blk_volume_info One series per volume.
# TYPE blk_volume_info gauge
blk_volume_info{volume="a",state="live"} 1
# TYPE blk_volume_io_latency_seconds histogram
blk_volume_io_latency_seconds_bucket{volume="a",le="0.001"} 3
blk_volume_io_latency_seconds_bucket{volume="a",le="+Inf"} 4
blk_volume_io_latency_seconds_sum{volume="a"} 0.01
blk_volume_io_latency_seconds_count{volume="a"} 4
# TYPE blk_volume_backend_reconnects_total counter
# TYPE blk_unknown_ublk_devices gauge
blk_unknown_ublk_devices 0
"""


class CheckMetricsExportedTest(unittest.TestCase):
    def test_histogram_samples_count_for_their_family(self):
        types, with_series = parse_scrape(SCRAPE)
        self.assertEqual(types["blk_volume_io_latency_seconds"], "histogram")
        self.assertIn("blk_volume_io_latency_seconds", with_series)
        self.assertNotIn("blk_volume_backend_reconnects_total", with_series)

    def test_present_metrics_pass(self):
        names = {"blk_volume_info": ["p1"], "blk_volume_io_latency_seconds_bucket": ["p2"],
                 "blk_volume_io_latency_seconds_count": ["p3"], "blk_unknown_ublk_devices": ["p4"]}
        self.assertEqual(missing_metrics(SCRAPE, names), [])

    def test_unexported_metric_is_named_with_where_it_is_queried(self):
        missing = missing_metrics(SCRAPE, {"blk_volume_ios_total": ["panel IOPS"],
                                           "blk_volume_info": ["variable volume"]})
        self.assertEqual(missing, [("blk_volume_ios_total", "not exported", ["panel IOPS"])])

    def test_unexported_histogram_is_reported_as_its_family(self):
        missing = missing_metrics("", {"blk_x_seconds_bucket": ["p"]})
        self.assertEqual(missing, [("blk_x_seconds", "not exported", ["p"])])

    def test_family_without_series(self):
        names = {"blk_volume_backend_reconnects_total": ["rule R"]}
        self.assertEqual(missing_metrics(SCRAPE, names),
                         [("blk_volume_backend_reconnects_total", "exported without any series",
                           ["rule R"])])
        self.assertEqual(missing_metrics(SCRAPE, names, declared_only=True), [])
        self.assertEqual(missing_metrics(SCRAPE, names,
                                         may_be_empty=["blk_volume_backend_reconnects_total"]),
                         [])

    def test_names_come_from_panels_variables_and_rules(self):
        dashboard = {
            "templating": {"list": [
                {"name": "volume", "type": "query",
                 "query": 'label_values(blk_volume_info{instance=~"$node"}, volume)'}]},
            "panels": [{"type": "row", "title": "r", "panels": [
                {"title": "nested", "targets": [
                    {"refId": "A", "expr": "rate(blk_a_total[$__rate_interval])"}]}]},
                {"title": "top", "targets": [
                    {"refId": "B", "expr": "histogram_quantile(0.5, blk_b_seconds_bucket)"}]}],
        }
        with tempfile.TemporaryDirectory() as tmp:
            dashboard_path = os.path.join(tmp, "d.json")
            rules_path = os.path.join(tmp, "r.yaml")
            with open(dashboard_path, "w") as f:
                json.dump(dashboard, f)
            with open(rules_path, "w") as f:
                f.write("groups:\n- name: g\n  rules:\n  - alert: BlkC\n"
                        "    expr: blk_c > 0\n    annotations: {summary: 'not blk_d'}\n")
            names = queried_names(dashboard_path, [rules_path])
        self.assertEqual(sorted(names), ["blk_a_total", "blk_b_seconds_bucket", "blk_c",
                                         "blk_volume_info"])
        self.assertEqual(names["blk_c"], ["rule BlkC"])


if __name__ == "__main__":
    unittest.main()
