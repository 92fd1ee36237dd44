#!/usr/bin/env python3
"""Usage: check_image.py ARCHIVE DAEMONSET_YAML

The node image deploy/image/build.sh made is what the DaemonSet can run: an OCI archive whose
index names one manifest tagged VERSION, every blob matching its digest; a config with
blkagent as entrypoint, user 0:0 and at least one layer; the DaemonSet's blk containers name
blk:VERSION. Then, as root, the layers are unpacked and every program the DaemonSet's blk
containers run (their commands and exec probes) runs in a chroot of them (--version: every
library it loads is there), and so do the tools blk-csi runs."""
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

import yaml

ENTRYPOINT = "/usr/bin/blkagent"
TOOLS = [["blkid", "-V"], ["mkfs.ext4", "-V"], ["resize2fs"], ["mkfs.xfs", "-V"],
         ["xfs_growfs", "-V"]]


def read_blob(archive, digest):
    algorithm, value = digest.split(":", 1)
    data = archive.extractfile("./blobs/%s/%s" % (algorithm, value)).read()
    if hashlib.new(algorithm, data).hexdigest() != value:
        raise ValueError("blob %s does not match its digest" % digest)
    return data


def check(archive_path, daemonset_path):
    errors = []
    with tarfile.open(archive_path) as archive:
        index = json.load(archive.extractfile("./index.json"))
        if len(index.get("manifests", [])) != 1:
            return ["the index holds %d manifests, want 1" % len(index.get("manifests", []))]
        entry = index["manifests"][0]
        tag = entry.get("annotations", {}).get("org.opencontainers.image.ref.name", "")
        manifest = json.loads(read_blob(archive, entry["digest"]))
        config = json.loads(read_blob(archive, manifest["config"]["digest"]))
        run = config.get("config", {})
        if run.get("Entrypoint") != [ENTRYPOINT]:
            errors.append("entrypoint %r, want blkagent" % run.get("Entrypoint"))
        if run.get("User") != "0:0":
            errors.append("user %r, want 0:0 (the agent needs root)" % run.get("User"))
        layers = [read_blob(archive, layer["digest"]) for layer in manifest.get("layers", [])]
        if not layers:
            errors.append("the image has no layer")
        if len(config.get("rootfs", {}).get("diff_ids", [])) != len(layers):
            errors.append("the config's diff_ids do not match the manifest's layers")

    with open(daemonset_path) as f:
        daemonset = yaml.safe_load(f)
    programs = set()
    for container in daemonset["spec"]["template"]["spec"]["containers"]:
        if container["name"] in ("blkagent", "blk-csi") and container["image"] != "blk:" + tag:
            errors.append("the DaemonSet's %s runs %s, the archive holds blk:%s"
                          % (container["name"], container["image"], tag))
        if container["image"].split(":")[0] != "blk":
            continue
        programs.add(container["command"][0])
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            command = container.get(probe, {}).get("exec", {}).get("command")
            if command:
                programs.add(command[0])
    if errors or os.geteuid() != 0:
        return errors

    with tempfile.TemporaryDirectory() as rootfs:
        for layer in layers:
            data = gzip.decompress(layer) if layer[:2] == b"\x1f\x8b" else layer
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                tar.extractall(rootfs)
        commands = [[program, "--version"] for program in sorted(programs)] + TOOLS
        # /proc as a container has it: the loader finds $ORIGIN (the binaries' RUNPATH) there.
        # A mount namespace of its own takes the mount away when the command ends.
        in_image = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"', rootfs]
        for command in commands:
            done = subprocess.run(in_image + command, capture_output=True, text=True)
            # resize2fs without arguments prints its usage and exits 1: it ran.
            if done.returncode not in (0, 1) or "error while loading shared" in done.stderr:
                errors.append("%s in the image: exit %d: %s"
                              % (" ".join(command), done.returncode, done.stderr.strip()))
            elif command[-1] == "--version" and done.stdout.strip() != tag:
                errors.append("%s says %r, the image is tagged %s"
                              % (command[0], done.stdout.strip(), tag))
    return errors


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    errors = check(sys.argv[1], sys.argv[2])
    for error in errors:
        print("FAIL:", error)
    if not errors:
        print("ok: %s runs as the DaemonSet expects" % sys.argv[1])
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
