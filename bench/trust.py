#!/usr/bin/env python3
"""The trust estimate of one agent under a load that drops (snaplock(7), TRUST).

Starts snaplockd on a socket of its own, sends LOCK and UNLOCK at a steady
rate, then at a lower rate, then nothing, and prints what INFO says of
`trust` and `uptime` once a second, from another connection (INFO is not a
call, so watching does not change what is watched).

    bench/trust.py --bin target/release/snaplockd [--high 20] [--low 2]
                   [--high-secs 30] [--low-secs 200] [--idle-secs 150]

Rates are calls per second (a LOCK and its UNLOCK are two calls). Python 3
standard library only; every wait is bounded.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time


def parse(line):
    word, _, rest = line.strip().partition(" ")
    params = {}
    for part in rest.split(";"):
        name, eq, value = part.partition("=")
        if eq:
            params[name] = value
    return word, params


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(5.0)
        self.s.connect(path)
        self.buf = b""

    def request(self, line):
        self.s.sendall(line.encode() + b"\n")
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("the agent closed the connection")
            self.buf += chunk
        reply, _, self.buf = self.buf.partition(b"\n")
        return parse(reply.decode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--high", type=float, default=20.0)
    ap.add_argument("--low", type=float, default=2.0)
    ap.add_argument("--high-secs", type=float, default=30.0)
    ap.add_argument("--low-secs", type=float, default=200.0)
    ap.add_argument("--idle-secs", type=float, default=150.0)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="snaplock-trust-")
    sock = os.path.join(tmp, "s.sock")
    agent = subprocess.Popen(
        [args.bin, "--socket", sock, "-n", "trust_bench", "--state-dir", tmp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if os.path.exists(sock):
                break
            time.sleep(0.01)
        load, watch = Conn(sock), Conn(sock)
        phases = [("high", args.high, args.high_secs), ("low", args.low, args.low_secs),
                  ("idle", 0.0, args.idle_secs)]
        start = time.monotonic()
        print("t_s\tphase\tcalls_per_s\ttrust\tuptime_s", flush=True)
        next_watch = start
        calls = 0
        for name, rate, secs in phases:
            phase_start = time.monotonic()
            phase_end = phase_start + secs
            next_call = phase_start
            while time.monotonic() < phase_end:
                now = time.monotonic()
                if rate > 0 and now >= next_call:
                    word = "LOCK" if calls % 2 == 0 else "UNLOCK"
                    load.request(f"{word} object_name=trust-bench")
                    calls += 1
                    next_call += 1.0 / rate
                if now >= next_watch:
                    _, p = watch.request("INFO")
                    print(f"{now - start:.1f}\t{name}\t{rate:g}\t{p.get('trust')}\t"
                          f"{p.get('uptime')}", flush=True)
                    next_watch += 1.0
                wake = min(next_watch, next_call if rate > 0 else phase_end, phase_end)
                time.sleep(max(0.0, wake - time.monotonic()))
    finally:
        agent.terminate()
        try:
            agent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            agent.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
