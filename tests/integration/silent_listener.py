#!/usr/bin/env python3
"""A Unix socket server that accepts connections and never answers: an NBD server
stuck in its handshake. The agent's probe of it blocks until this server lets go.

silent_listener.py SOCKET DIR
  DIR/ready      written once listening
  DIR/open       how many connections are open now
  DIR/max_open   the most that were open at once
  touch DIR/release: close every connection and close new ones at once
"""
import os
import select
import socket
import sys

path, state = sys.argv[1], sys.argv[2]


def record(name, value):
    tmp = os.path.join(state, name + ".tmp")
    with open(tmp, "w") as f:
        f.write(f"{value}\n")
    os.rename(tmp, os.path.join(state, name))


server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(128)
connections = []
most = 0
record("open", 0)
record("max_open", 0)
record("ready", 1)
release = os.path.join(state, "release")
while True:
    # The release file is polled: it is the test's only way to speak to this server.
    readable, _, _ = select.select([server] + connections, [], [], 0.02)
    for sock in readable:
        if sock is server:
            conn, _ = server.accept()
            connections.append(conn)
        elif not sock.recv(4096):  # the agent gave up on it
            connections.remove(sock)
            sock.close()
    if os.path.exists(release):
        for conn in connections:
            conn.close()
        connections = []
    most = max(most, len(connections))
    record("open", len(connections))
    record("max_open", most)
