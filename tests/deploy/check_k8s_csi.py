#!/usr/bin/env python3
"""Usage: check_k8s_csi.py KUSTOMIZE_DIR BIN_DIR

deploy/kubernetes renders with `kubectl kustomize` and fits together: every flag a
container passes is one the binary (blkagent, blkctl, blk-csi from BIN_DIR) accepts; the
CSIDriver's name is blk-csi's --driver-name and the kubelet plugin directory's name; blk-csi
listens where the registrar looks and the kubelet registration path points; the agent and
blk-csi share the agent socket's directory; the kubelet directory propagates mounts back
(Bidirectional); rollouts never restart an agent (OnDelete)."""
import os
import subprocess
import sys

import yaml


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


def check(kustomize_dir, bin_dir):
    rendered = subprocess.run(["kubectl", "kustomize", kustomize_dir], capture_output=True,
                              text=True, check=True).stdout
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rendered) if d}
    errors = []
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
        errors.append("the CSIDriver must say attachRequired: false (no Controller service)")
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
    return errors


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    errors = check(sys.argv[1], sys.argv[2])
    for error in errors:
        print("FAIL:", error)
    if not errors:
        print("ok: deploy/kubernetes renders and matches the binaries' flags")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
