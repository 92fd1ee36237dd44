#!/usr/bin/env python3
"""Usage: check_k8s_csi.py KUSTOMIZE_DIR BIN_DIR

deploy/kubernetes renders with `kubectl kustomize` and fits together: every flag a
container passes is one the binary (blkagent, blkctl, blk-csi from BIN_DIR) accepts; the
CSIDriver's name is blk-csi's --driver-name and the kubelet plugin directory's name; blk-csi
listens where the registrar looks and the kubelet registration path points; the agent and
blk-csi share the agent socket's directory; the kubelet directory propagates mounts back
(Bidirectional); rollouts never restart an agent (OnDelete); the agent serves /metrics on the
pod's metrics port at an address Prometheus reaches (not its loopback default), and not on
every address of the node (0.0.0.0 with hostNetwork). blk-csi serves the controller
and the csi-provisioner next to it calls it in --node-deployment mode, the only container with
a service account token, with the rights it needs; the example StorageClasses name the driver,
bind at first consumer and restrict topology by blk-csi's key.

Every document (the rendered kustomization and the example files beside it) parses into its
Kubernetes type: kubectl decodes it offline (--local) into the typed object and prints it
back, and no field of the input may be missing or changed in the output (fields kubectl adds,
like creationTimestamp: null or an empty status, are fine). kubectl has an offline typed
decoder only behind `set env` (kinds with a pod template; a PersistentVolumeClaim rides in a
StatefulSet's volumeClaimTemplates) and `set subject` (role bindings); for the other kinds
(PLAIN_KINDS) the field names are checked against the short lists below, written from the
Kubernetes API reference. kubectl never talks to a cluster here (KUBECONFIG=/dev/null)."""
import copy
import os
import subprocess
import sys

import yaml

# The marker the typed round trip adds (a variable, a subject) and removes again.
MARKER = "BLK_ROUND_TRIP"
POD_TEMPLATE_KINDS = {"DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job", "Pod"}
BINDING_KINDS = {"ClusterRoleBinding", "RoleBinding"}
METADATA_FIELDS = {"name", "namespace", "labels", "annotations"}
# kind -> {path: the fields allowed there}; "" is the top level, "x[]" each item of list x.
PLAIN_KINDS = {
    "Namespace": {"": {"apiVersion", "kind", "metadata", "spec"}},
    "ServiceAccount": {"": {"apiVersion", "kind", "metadata", "automountServiceAccountToken",
                            "secrets", "imagePullSecrets"}},
    "CSIDriver": {
        "": {"apiVersion", "kind", "metadata", "spec"},
        "spec": {"attachRequired", "podInfoOnMount", "volumeLifecycleModes", "storageCapacity",
                 "fsGroupPolicy", "tokenRequests", "requiresRepublish", "seLinuxMount",
                 "nodeAllocatableUpdatePeriodSeconds"},
    },
    "StorageClass": {
        "": {"apiVersion", "kind", "metadata", "provisioner", "parameters", "reclaimPolicy",
             "mountOptions", "allowVolumeExpansion", "volumeBindingMode", "allowedTopologies"},
        "allowedTopologies[]": {"matchLabelExpressions"},
        "allowedTopologies[].matchLabelExpressions[]": {"key", "values"},
    },
    "ClusterRole": {
        "": {"apiVersion", "kind", "metadata", "rules", "aggregationRule"},
        "rules[]": {"apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"},
    },
    "PersistentVolume": {
        "": {"apiVersion", "kind", "metadata", "spec"},
        "spec": {"capacity", "accessModes", "volumeMode", "persistentVolumeReclaimPolicy",
                 "storageClassName", "csi", "nodeAffinity", "mountOptions", "claimRef",
                 "volumeAttributesClassName"},
        "spec.csi": {"driver", "volumeHandle", "fsType", "readOnly", "volumeAttributes",
                     "controllerPublishSecretRef", "nodeStageSecretRef", "nodePublishSecretRef",
                     "controllerExpandSecretRef", "nodeExpandSecretRef"},
    },
}
PROVISIONER_RULES = {  # (API group, resource) -> verbs the csi-provisioner needs
    ("", "persistentvolumes"): {"get", "list", "watch", "create", "delete"},
    ("", "persistentvolumeclaims"): {"get", "list", "watch", "update"},
    ("storage.k8s.io", "storageclasses"): {"get", "list", "watch"},
    ("storage.k8s.io", "csinodes"): {"get", "list", "watch"},
    ("", "nodes"): {"get", "list", "watch"},
    ("", "events"): {"create", "patch"},
}
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def flags_of(bin_dir, binary, subcommand=None):
    argv = [os.path.join(bin_dir, binary)] + ([subcommand] if subcommand else []) + ["--help"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return {word.split("=")[0].rstrip(",") for word in out.split() if word.startswith("--")}


def flag_values(args):
    values = {}
    for arg in args:
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
            values[name] = value
    return values


def mount_path(container, volume):
    for mount in container.get("volumeMounts", []):
        if mount["name"] == volume:
            return mount
    return None


def kubectl(args, stdin=None):
    env = dict(os.environ, KUBECONFIG=os.devnull)
    return subprocess.run(["kubectl"] + args, input=stdin, capture_output=True, text=True,
                          check=True, env=env).stdout


def differences(given, got, where):
    """Where `got` lacks or changes what `given` has (what `got` adds is not looked at)."""
    if isinstance(given, dict):
        if not isinstance(got, dict):
            return ["%s: %r became %r" % (where, given, got)]
        found = []
        for key, value in given.items():
            if key not in got:
                found.append("%s.%s was dropped" % (where, key))
            else:
                found += differences(value, got[key], "%s.%s" % (where, key))
        return found
    if isinstance(given, list):
        if not isinstance(got, list) or len(got) != len(given):
            return ["%s: %r became %r" % (where, given, got)]
        found = []
        for i, (a, b) in enumerate(zip(given, got)):
            found += differences(a, b, "%s[%d]" % (where, i))
        return found
    return [] if given == got else ["%s: %r became %r" % (where, given, got)]


def without_marker_env(doc):
    spec = doc["spec"] if doc["kind"] == "Pod" else (doc.get("spec", {}).get("template", {})
                                                       .get("spec", {}))
    for key in ("containers", "initContainers"):
        for container in spec.get(key, []):
            env = [e for e in container.get("env", []) if e.get("name") != MARKER]
            if env:
                container["env"] = env
            else:
                container.pop("env", None)
    return doc


def typed_round_trip(doc):
    """The document as kubectl decodes it into its type and prints it again, or None when
    kubectl has no offline typed decoder for the kind."""
    kind = doc.get("kind")
    if kind in POD_TEMPLATE_KINDS:
        out = kubectl(["set", "env", "--local", "-f", "-", "-o", "yaml", MARKER + "=1"],
                      yaml.safe_dump(doc))
        return without_marker_env(yaml.safe_load(out))
    if kind in BINDING_KINDS:
        out = yaml.safe_load(kubectl(["set", "subject", "--local", "-f", "-", "-o", "yaml",
                                      "--user=" + MARKER], yaml.safe_dump(doc)))
        out["subjects"] = [s for s in out.get("subjects", []) if s.get("name") != MARKER]
        return out
    if kind == "PersistentVolumeClaim":
        carrier = {
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "carrier"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "serviceName": "carrier",
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c", "image": "c"}]}},
                     "volumeClaimTemplates": [doc]}}
        return typed_round_trip(carrier)["spec"]["volumeClaimTemplates"][0]
    return None


def plain_field_errors(doc, name):
    errors = []
    allowed_at = PLAIN_KINDS[doc["kind"]]

    def walk(node, path):
        if isinstance(node, list):
            for item in node:
                walk(item, path + "[]")
            return
        if not isinstance(node, dict) or path not in allowed_at:
            return
        for key, value in node.items():
            if key not in allowed_at[path]:
                errors.append("%s: %s has no field %s" % (name, path or "the top level", key))
            else:
                walk(value, "%s.%s" % (path, key) if path else key)

    walk(doc, "")
    unknown = set(doc.get("metadata", {})) - METADATA_FIELDS
    if unknown:
        errors.append("%s: metadata has no field(s) %s" % (name, sorted(unknown)))
    return errors


def round_trip_errors(named_docs):
    errors = []
    for name, doc in named_docs:
        if doc.get("kind") in PLAIN_KINDS:
            errors += plain_field_errors(doc, name)
            continue
        try:
            typed = typed_round_trip(copy.deepcopy(doc))
        except subprocess.CalledProcessError as e:
            errors.append("%s: kubectl cannot decode it: %s" % (name, e.stderr.strip()))
            continue
        if typed is None:
            errors.append("%s: no typed round trip for kind %s (add one, or its fields to "
                          "PLAIN_KINDS)" % (name, doc.get("kind")))
            continue
        errors += ["%s: %s" % (name, d) for d in differences(doc, typed, doc["kind"])]
    return errors


def example_documents(kustomize_dir):
    """(file: kind/name, document) of the example files beside the kustomization."""
    with open(os.path.join(kustomize_dir, "kustomization.yaml")) as f:
        listed = set(yaml.safe_load(f).get("resources", [])) | {"kustomization.yaml"}
    named = []
    for file in sorted(os.listdir(kustomize_dir)):
        if file.endswith(".yaml") and file not in listed:
            with open(os.path.join(kustomize_dir, file)) as f:
                for doc in yaml.safe_load_all(f):
                    if doc:
                        named.append(("%s: %s/%s" % (file, doc["kind"], doc["metadata"]["name"]),
                                      doc))
    return named


def check_provisioner(docs, spec, containers, volumes, csi_socket, driver_name):
    errors = []
    provisioner = containers.get("csi-provisioner")
    if not provisioner:
        return ["the node pod needs a csi-provisioner container, has %s" % sorted(containers)]
    args = provisioner.get("args", [])
    flags = flag_values(args)
    if flags.get("--csi-address") != csi_socket:
        errors.append("the csi-provisioner calls %r, blk-csi listens on %r"
                      % (flags.get("--csi-address"), csi_socket))
    for wanted in ("--node-deployment", "--strict-topology"):
        if wanted not in args and flags.get(wanted) != "true":
            errors.append("the csi-provisioner needs %s (node-local volumes)" % wanted)
    mount = mount_path(provisioner, "plugin-dir")
    if not mount or mount["mountPath"] != os.path.dirname(csi_socket):
        errors.append("the csi-provisioner does not mount plugin-dir at %s"
                      % os.path.dirname(csi_socket))
    node_name = [e for e in provisioner.get("env", []) if e["name"] == "NODE_NAME"]
    if not node_name or node_name[0].get("valueFrom", {}).get("fieldRef", {}).get(
            "fieldPath") != "spec.nodeName":
        errors.append("the csi-provisioner needs NODE_NAME from spec.nodeName")
    # The token: mounted into the provisioner, and into nothing else.
    if spec.get("automountServiceAccountToken") is not False:
        errors.append("the node pod must not automount its token (only the provisioner calls "
                      "the API)")
    for name, container in containers.items():
        has_token = any(m["mountPath"] == TOKEN_PATH for m in container.get("volumeMounts", []))
        if has_token != (name == "csi-provisioner"):
            errors.append("%s %s the service account token" % (
                name, "mounts" if has_token else "does not mount"))
    token_mounts = [m for m in provisioner.get("volumeMounts", [])
                    if m["mountPath"] == TOKEN_PATH]
    if token_mounts and "serviceAccountToken" not in str(
            volumes.get(token_mounts[0]["name"], {}).get("projected")):
        errors.append("the provisioner's token volume is no projected serviceAccountToken")

    # Its rights: a ClusterRole bound to the pod's service account.
    account = spec.get("serviceAccountName")
    namespace = next((d["metadata"].get("namespace") for (kind, _), d in docs.items()
                      if kind == "DaemonSet"), None)
    granted = {}
    for (kind, _), binding in docs.items():
        if kind != "ClusterRoleBinding":
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == account and
                   s.get("namespace") == namespace for s in binding.get("subjects", [])):
            continue
        role = docs.get(("ClusterRole", binding["roleRef"]["name"]), {})
        for rule in role.get("rules", []):
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    granted.setdefault((group, resource), set()).update(rule.get("verbs", []))
    for (group, resource), verbs in sorted(PROVISIONER_RULES.items()):
        missing = verbs - granted.get((group, resource), set())
        if missing:
            errors.append("service account %s/%s may not %s %s" % (
                namespace, account, "/".join(sorted(missing)), resource))
    return errors


def host_path_of(container, path, volumes):
    """The host directory the container sees at path, or None."""
    for mount in container.get("volumeMounts", []):
        if mount["mountPath"] == path:
            return volumes.get(mount["name"], {}).get("hostPath", {}).get("path")
    return None


def check_storage_classes(named_examples, driver_name, agent, csi, volumes):
    errors = []
    topology_key = driver_name + "/node"
    classes = {d["metadata"]["name"]: d for _, d in named_examples if d["kind"] == "StorageClass"}
    claims = [d for _, d in named_examples if d["kind"] == "PersistentVolumeClaim"]
    if len(classes) < 2 or not claims:
        errors.append("the examples need StorageClasses (file pool, NBD) and a PVC, have %s"
                      % sorted(classes))
    schemes = set()
    for name, sc in sorted(classes.items()):
        if sc.get("provisioner") != driver_name:
            errors.append("StorageClass %s: provisioner %r, the driver is %r"
                          % (name, sc.get("provisioner"), driver_name))
        if sc.get("volumeBindingMode") != "WaitForFirstConsumer":
            errors.append("StorageClass %s must bind at first consumer (node-local "
                          "provisioning)" % name)
        backend = sc.get("parameters", {}).get("backend", "")
        scheme = backend.split(":", 1)[0]
        schemes.add(scheme)
        # blk-csi refuses a class whose claims would share one backing (csi/backing_template.h).
        if "{volume}" not in backend:
            errors.append("StorageClass %s: backend %r has no {volume}: blk-csi refuses it"
                          % (name, backend))
        if scheme == "file":
            pool = os.path.dirname(backend[len("file://"):])
            for container in (agent, csi):
                if not host_path_of(container, pool, volumes):
                    errors.append("StorageClass %s: %s does not mount the pool %s from the host"
                                  % (name, container["name"], pool))
            if host_path_of(agent, pool, volumes) != host_path_of(csi, pool, volumes):
                errors.append("StorageClass %s: blkagent and blk-csi see different pools at %s"
                              % (name, pool))
        keys = {e["key"] for term in sc.get("allowedTopologies", [])
                for e in term.get("matchLabelExpressions", [])}
        if keys - {topology_key}:
            errors.append("StorageClass %s: allowedTopologies keys %s, blk-csi's is %s"
                          % (name, sorted(keys), topology_key))
    if not {"file", "nbd"} <= schemes:
        errors.append("the example StorageClasses need a file pool and an nbd backend, have %s"
                      % sorted(schemes))
    for claim in claims:
        wanted = claim["spec"].get("storageClassName")
        if wanted and wanted not in classes:
            errors.append("PVC %s asks for StorageClass %r, the examples have %s"
                          % (claim["metadata"]["name"], wanted, sorted(classes)))
    return errors


def check_metrics_address(agent, pod_spec):
    """blkagent's /metrics default is 127.0.0.1:9477: the Service's scrapes need an address."""
    address = flag_values(agent["command"]).get("--metrics-address")
    if not address:
        return ["blkagent passes no --metrics-address: its default, loopback, is out of "
                "Prometheus' reach"]
    host, _, port = address.rpartition(":")
    errors = []
    if host in ("localhost", "[::1]") or host.startswith("127."):
        errors.append("blkagent --metrics-address %s is loopback, out of Prometheus' reach"
                      % address)
    if pod_spec.get("hostNetwork") and host in ("0.0.0.0", "[::]", ""):
        errors.append("blkagent --metrics-address %s with hostNetwork serves every address of "
                      "the node" % address)
    ports = [p.get("containerPort") for p in agent.get("ports", []) if p.get("name") == "metrics"]
    if not port.isdigit() or ports != [int(port)]:
        errors.append("blkagent --metrics-address %s, but its container's metrics port is %s"
                      % (address, ports))
    return errors


def check_liveness(containers, csi, csi_socket):
    """The CSI livenessprobe sidecar asks blk-csi's Probe; blk-csi's own probe reads its answer."""
    probes = [c for c in containers.values() if "sig-storage/livenessprobe:" in c.get("image", "")]
    if len(probes) != 1:
        return ["want one CSI livenessprobe sidecar, have %d" % len(probes)]
    sidecar = probes[0]
    flags = flag_values(sidecar.get("args", []))
    errors = []
    if flags.get("--csi-address") != csi_socket:
        errors.append("the livenessprobe calls %r, blk-csi listens on %r"
                      % (flags.get("--csi-address"), csi_socket))
    mount = mount_path(sidecar, "plugin-dir")
    if not mount or mount["mountPath"] != os.path.dirname(csi_socket):
        errors.append("the livenessprobe does not mount plugin-dir where blk-csi listens")
    http = csi.get("livenessProbe", {}).get("httpGet", {})
    ports = {p["name"]: p["containerPort"] for p in csi.get("ports", [])}
    port = ports.get(http.get("port"), http.get("port"))
    if http.get("path") != "/healthz" or str(port) != flags.get("--health-port"):
        errors.append("blk-csi's liveness probe asks %s:%s, the livenessprobe answers /healthz on "
                      "port %s" % (http.get("path"), port, flags.get("--health-port")))
    return errors


def check(kustomize_dir, bin_dir):
    rendered = kubectl(["kustomize", kustomize_dir])
    rendered_docs = [d for d in yaml.safe_load_all(rendered) if d]
    docs = {(d["kind"], d["metadata"]["name"]): d for d in rendered_docs}
    examples = example_documents(kustomize_dir)
    errors = round_trip_errors(
        [("kustomization: %s/%s" % key, d) for key, d in docs.items()] + examples)
    drivers = [d for (kind, _), d in docs.items() if kind == "CSIDriver"]
    daemonsets = [d for (kind, _), d in docs.items() if kind == "DaemonSet"]
    if len(drivers) != 1 or len(daemonsets) != 1:
        return ["want one CSIDriver and one DaemonSet, have %s" % sorted(docs)]
    driver, daemonset = drivers[0], daemonsets[0]
    spec = daemonset["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in spec["containers"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    agent, csi, registrar = (containers.get(n) for n in ("blkagent", "blk-csi",
                                                         "node-driver-registrar"))
    if not (agent and csi and registrar):
        return ["the pod needs blkagent, blk-csi and node-driver-registrar, has %s"
                % sorted(containers)]

    for container, binary in ((agent, "blkagent"), (csi, "blk-csi")):
        known = flags_of(bin_dir, binary)
        for arg in container["command"][1:]:
            if arg.split("=")[0] not in known:
                errors.append("%s passes %s, which %s does not accept" % (container["name"],
                                                                        arg, binary))
        if os.path.basename(container["command"][0]) != binary:
            errors.append("%s runs %s, not %s" % (container["name"], container["command"][0],
                                                  binary))
    probe = agent["livenessProbe"]["exec"]["command"]
    known = flags_of(bin_dir, "blkctl") | flags_of(bin_dir, "blkctl", probe[-1])
    for arg in probe[1:-1]:
        if arg.split("=")[0] not in known:
            errors.append("the liveness probe passes %s, which blkctl does not accept" % arg)

    agent_flags, csi_flags = flag_values(agent["command"]), flag_values(csi["command"])
    probe_flags = flag_values(probe)
    name = driver["metadata"]["name"]
    if csi_flags.get("--driver-name") != name:
        errors.append("blk-csi --driver-name %r, CSIDriver %r" % (csi_flags.get("--driver-name"),
                                                                  name))
    if driver["spec"].get("attachRequired") is not False:
        errors.append("the CSIDriver must say attachRequired: false (no ControllerPublish)")
    socket = agent_flags.get("--socket")
    for who, value in (("blk-csi --agent-socket", csi_flags.get("--agent-socket")),
                       ("the liveness probe's --socket", probe_flags.get("--socket"))):
        if value != socket:
            errors.append("%s is %r, the agent listens on %r" % (who, value, socket))
    socket_dir = os.path.dirname(socket or "")
    for container in (agent, csi):
        mount = mount_path(container, "agent-socket")
        if not mount or mount["mountPath"] != socket_dir:
            errors.append("%s does not mount agent-socket at %s" % (container["name"],
                                                                    socket_dir))

    errors += check_metrics_address(agent, spec)

    plugin_host = volumes["plugin-dir"]["hostPath"]["path"]
    if os.path.basename(plugin_host) != name:
        errors.append("the plugin directory %s is not named after the driver %s"
                      % (plugin_host, name))
    endpoint = csi_flags.get("--endpoint", "")
    if not endpoint.startswith("unix://"):
        errors.append("blk-csi --endpoint %r is not unix://" % endpoint)
    csi_socket = endpoint[len("unix://"):]
    for container in (csi, registrar):
        mount = mount_path(container, "plugin-dir")
        if not mount or mount["mountPath"] != os.path.dirname(csi_socket):
            errors.append("%s does not mount plugin-dir where blk-csi listens (%s)"
                          % (container["name"], csi_socket))
    registrar_flags = flag_values(registrar["args"])
    if registrar_flags.get("--csi-address") != csi_socket:
        errors.append("the registrar calls %r, blk-csi listens on %r"
                      % (registrar_flags.get("--csi-address"), csi_socket))
    want_registration = os.path.join(plugin_host, os.path.basename(csi_socket))
    if registrar_flags.get("--kubelet-registration-path") != want_registration:
        errors.append("the kubelet registration path is %r, want %r"
                      % (registrar_flags.get("--kubelet-registration-path"), want_registration))
    kubelet = mount_path(csi, "kubelet-dir")
    if not kubelet or kubelet.get("mountPropagation") != "Bidirectional":
        errors.append("blk-csi must mount the kubelet directory with Bidirectional propagation")
    if daemonset["spec"].get("updateStrategy", {}).get("type") != "OnDelete":
        errors.append("the DaemonSet must use updateStrategy OnDelete")
    if agent["securityContext"].get("seccompProfile", {}).get("type") != "Unconfined":
        errors.append("blkagent needs seccomp Unconfined (io_uring)")
    if "--controller" not in csi["command"]:
        errors.append("blk-csi must serve the controller (--controller) for the csi-provisioner")
    state_dir = csi_flags.get("--state-dir")
    if not state_dir or not host_path_of(csi, state_dir, volumes):
        errors.append("blk-csi --state-dir %r is not a host directory: its records of "
                      "provisioned volumes would die with the pod" % state_dir)
    errors += check_liveness(containers, csi, csi_socket)
    for container in spec["containers"]:
        if not container.get("resources", {}).get("requests"):
            errors.append("%s requests no resources: the scheduler cannot place it honestly"
                          % container["name"])
    errors += check_provisioner(docs, spec, containers, volumes, csi_socket, name)
    errors += check_storage_classes(examples, name, agent, csi, volumes)
    return errors


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    errors = check(sys.argv[1], sys.argv[2])
    for error in errors:
        print("FAIL:", error)
    if not errors:
        print("ok: deploy/kubernetes renders, round-trips through its types and matches the "
              "binaries' flags")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
