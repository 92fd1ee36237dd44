#!/usr/bin/env python3
"""Usage: check_k8s_manifests.py DEPLOY_DIR

The Kubernetes manifests in deploy/ fit together: the ServiceMonitor selects the Service
and scrapes its metrics port, 9477, where the DaemonSet's agent listens (check_k8s_csi.py
checks its --metrics-address); the Service is named like the job the alerts expect; the
PrometheusRule holds the alert rules; the Grafana ConfigMap carries the dashboard with the
sidecar's label."""
import json
import os
import sys

import yaml

AGENT_PORT = 9477
ALERT_JOB = 'job="blkagent"'


def check(deploy_dir):
    errors = []
    with open(os.path.join(deploy_dir, "prometheus", "servicemonitor.yaml")) as f:
        docs = {doc["kind"]: doc for doc in yaml.safe_load_all(f) if doc}
    service, monitor = docs.get("Service"), docs.get("ServiceMonitor")
    if not service or not monitor:
        return ["servicemonitor.yaml needs a Service and a ServiceMonitor, has %s" % list(docs)]
    wanted = monitor["spec"]["selector"]["matchLabels"]
    labels = service["metadata"].get("labels", {})
    if any(labels.get(k) != v for k, v in wanted.items()):
        errors.append("the ServiceMonitor selects %s, the Service has labels %s"
                      % (wanted, labels))
    ports = {p.get("name"): p for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        port = ports.get(endpoint.get("port"))
        if port is None:
            errors.append("the ServiceMonitor scrapes port %r, the Service has %s"
                          % (endpoint.get("port"), list(ports)))
        elif port.get("targetPort") != AGENT_PORT:
            errors.append("the Service sends port %r to %r, the agent listens on %d"
                          % (port["name"], port.get("targetPort"), AGENT_PORT))
    with open(os.path.join(deploy_dir, "prometheus", "blk-alerts.yaml")) as f:
        alerts = f.read()
    job = 'job="%s"' % service["metadata"]["name"]
    if ALERT_JOB not in alerts or job != ALERT_JOB:
        errors.append("the alerts expect %s, the ServiceMonitor's job is %s" % (ALERT_JOB, job))
    with open(os.path.join(deploy_dir, "prometheus", "prometheusrule.yaml")) as f:
        rule = yaml.safe_load(f)
    if rule.get("kind") != "PrometheusRule" or rule.get("spec") != yaml.safe_load(alerts):
        errors.append("prometheusrule.yaml is not a PrometheusRule holding blk-alerts.yaml")

    with open(os.path.join(deploy_dir, "grafana", "configmap.yaml")) as f:
        configmap = yaml.safe_load(f)
    if configmap["metadata"]["labels"].get("grafana_dashboard") != "1":
        errors.append('the ConfigMap lacks the label grafana_dashboard: "1"')
    with open(os.path.join(deploy_dir, "grafana", "blk-dashboard.json")) as f:
        dashboard = json.load(f)
    if json.loads(configmap["data"]["blk-dashboard.json"]) != dashboard:
        errors.append("the ConfigMap's dashboard differs from blk-dashboard.json")
    return errors


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    errors = check(sys.argv[1])
    for error in errors:
        print("FAIL:", error, file=sys.stderr)
    if errors:
        sys.exit(1)
    print("ok: the manifests in %s fit together" % sys.argv[1])


if __name__ == "__main__":
    main()
