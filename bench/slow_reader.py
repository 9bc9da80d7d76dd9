#!/usr/bin/env python3
"""A client that sends faster than it reads, against one agent.

  bench/slow_reader.py --snaplockd target/release/snaplockd [--requests 300000] [--rate 100000]

Starts snaplockd on a temporary socket, sends REQUESTS `ALIVE serial=N`
lines from one thread as fast as the socket takes them, and reads the
replies from another at RATE lines per second at most. Prints how many
replies arrived before the end (all of them, or the agent closed the
connection). Python 3 standard library only; every wait is bounded; the
agent is stopped by pid.
"""

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--snaplockd", required=True)
    ap.add_argument("--requests", type=int, default=300000)
    ap.add_argument("--rate", type=float, default=100000.0)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="snaplock-slow-reader.")
    path = os.path.join(work, "s.sock")
    agent = subprocess.Popen([a.snaplockd, "--socket", path, "-n", "bench", "--log-level", "error"])
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise SystemExit("snaplockd did not start")
            time.sleep(0.05)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.settimeout(10)
        data = b"".join(b"ALIVE serial=%d\n" % i for i in range(a.requests))
        writer_error = []

        def write():
            try:
                s.sendall(data)
            except OSError as e:
                writer_error.append(str(e))

        t = threading.Thread(target=write)
        t.start()
        got, t0, end = 0, time.monotonic(), "all read"
        while got < a.requests:
            ahead = got / a.rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
            try:
                chunk = s.recv(65536)
            except OSError as e:
                end = "read: %s" % e
                break
            if not chunk:
                end = "closed by the agent"
                break
            got += chunk.count(b"\n")
        took = time.monotonic() - t0
        s.close()
        t.join(timeout=30)
        print("%d of %d replies in %.1f s (%s%s)" % (
            got, a.requests, took, end,
            "; write: " + writer_error[0] if writer_error else ""))
    finally:
        agent.terminate()
        try:
            agent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
