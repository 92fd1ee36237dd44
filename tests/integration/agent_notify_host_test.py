#!/usr/bin/env python3
"""blkagent tells systemd (sd_notify, the unit's Type=notify) READY=1 only once it has reconciled
its volumes and serves: when READY arrives the health service already says SERVING and calls are
answered; the STATUS line counts the volumes recovered; SIGTERM gives STOPPING=1. A
NOTIFY_SOCKET nobody listens on is logged and changes nothing else.

The restore is held up by silent_listener.py: the persisted volume's NBD server accepts the
agent's dial and never answers until the test releases it.

agent_notify_host_test.py BIN_DIR HEALTH_CHECK
"""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

bin_dir, health_check = pathlib.Path(sys.argv[1]), sys.argv[2]
here = pathlib.Path(__file__).resolve().parent
work = pathlib.Path(tempfile.mkdtemp())
started = []
failures = 0


def check(ok, name, detail=""):
    global failures
    if ok:
        print(f"ok   - {name}")
    else:
        print(f"FAIL - {name}: {detail}")
        failures += 1


def wait_for(seconds, condition):
    """Polls condition until it holds; False when `seconds` pass first."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def health(sock):
    run = subprocess.run([health_check, sock], capture_output=True, text=True)
    return (run.stdout + run.stderr).strip()


def blkctl(sock, *args):
    return subprocess.run([bin_dir / "blkctl", "--socket", sock, *args], capture_output=True,
                          text=True)


def start_agent(name, notify_socket, log):
    env = dict(os.environ, NOTIFY_SOCKET=notify_socket)
    agent = subprocess.Popen(
        [bin_dir / "blkagent", "--socket", work / f"{name}.sock", "--state-dir",
         work / f"{name}-state", "--metrics-address", "off", "--bpf-locality", "off",
         "--log-level", "debug"], env=env, stdout=log, stderr=subprocess.STDOUT)
    started.append(agent)
    return agent


def receive(notify, seconds):
    """The next notification as {key: value}, or None when none comes within `seconds`."""
    notify.settimeout(seconds)
    try:
        message = notify.recv(4096).decode()
    except (socket.timeout, BlockingIOError):
        return None
    return dict(line.split("=", 1) for line in message.splitlines() if "=" in line)


def receive_until(notify, key, seconds):
    """Every notification up to and including the first with `key`, or None without one."""
    deadline = time.monotonic() + seconds
    messages = []
    while (left := deadline - time.monotonic()) > 0:
        message = receive(notify, left)
        if message is None:
            break
        messages.append(message)
        if key in message:
            return messages
    return None


def count(path):
    try:
        return int(path.read_text())
    except (FileNotFoundError, ValueError):
        return 0


def main():
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(work / "notify.sock"))

    slow = work / "slow.d"
    slow.mkdir()
    started.append(subprocess.Popen([here / "silent_listener.py", work / "slow.nbd", slow]))
    check(wait_for(30, (slow / "ready").exists), "silent NBD server up")
    volumes = work / "a-state" / "volumes"
    volumes.mkdir(parents=True)
    (volumes / "restored.json").write_text(json.dumps(
        {"id": "restored", "sizeBytes": "1048576",
         "nbd": {"uri": f"nbd+unix:///exp?socket={work / 'slow.nbd'}"}}) + "\n")

    sock = str(work / "a.sock")
    with open(work / "a.log", "w") as log:
        agent = start_agent("a", str(work / "notify.sock"), log)
    if not wait_for(30, lambda: os.path.exists(sock)):
        check(False, "agent listens", (work / "a.log").read_text())
        return
    check(wait_for(30, lambda: count(slow / "open") >= 1), "restore dials the held-up export")
    status = health(sock)
    check(status == "NOT_SERVING", "health: NOT_SERVING while reconciling", status)
    # A call waits for the restore; meanwhile an early READY would have arrived.
    waiting = blkctl(sock, "--timeout", "1s", "list-volumes")
    check(waiting.returncode != 0 and "DEADLINE_EXCEEDED" in waiting.stderr,
          "calls wait while reconciling", waiting.stderr)
    early = receive(notify, 0)
    check(early is None, "no notification while reconciling", early)

    (slow / "release").touch()
    messages = receive_until(notify, "READY", 30)
    # Checked at once: READY must mean the agent serves already.
    status = health(sock)
    listed = blkctl(sock, "--timeout", "5s", "list-volumes", "-o", "json")
    check(messages is not None and messages[-1].get("READY") == "1", "READY=1 after the restore",
          messages)
    check(status == "SERVING", "health: SERVING when READY arrives", status)
    check(listed.returncode == 0 and
          [v["id"] for v in json.loads(listed.stdout).get("volumes", [])] == ["restored"],
          "list-volumes answers when READY arrives", listed.stdout + listed.stderr)
    ready_status = messages[-1].get("STATUS") if messages else None
    check(ready_status == "serving; 1 volume recovered (1 degraded)", "STATUS counts the recovered",
          ready_status)

    agent.send_signal(signal.SIGTERM)
    messages = receive_until(notify, "STOPPING", 30)
    check(messages is not None and messages[-1].get("STOPPING") == "1" and
          messages[-1].get("STATUS") == "stopping; leaving the devices", "SIGTERM: STOPPING=1",
          messages)
    check(agent.wait(timeout=60) == 0, "SIGTERM exits 0")

    # Nobody listens on NOTIFY_SOCKET: logged, and the agent serves all the same.
    sock = str(work / "b.sock")
    with open(work / "b.log", "w") as log:
        agent = start_agent("b", str(work / "nobody.sock"), log)
    check(wait_for(30, lambda: os.path.exists(sock) and health(sock) == "SERVING"),
          "an unreachable NOTIFY_SOCKET: still serves", health(sock))
    agent.send_signal(signal.SIGTERM)
    check(agent.wait(timeout=60) == 0, "an unreachable NOTIFY_SOCKET: SIGTERM exits 0")
    check("cannot notify systemd (READY=1" in (work / "b.log").read_text(),
          "an unreachable NOTIFY_SOCKET is logged", (work / "b.log").read_text())


try:
    main()
finally:
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()
    if failures:
        for log in sorted(work.glob("*.log")):
            print(f"--- {log.name}\n{log.read_text()}")
    shutil.rmtree(work)
sys.exit(1 if failures else 0)
