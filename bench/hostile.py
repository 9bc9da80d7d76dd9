#!/usr/bin/env python3
"""Clients that write and never read, against a clustered agent.

  bench/hostile.py --snaplockd target/release/snaplockd [--conns 1000] [--seconds 10]

Starts three agents on loopback (a1, a2, a3) as one cluster, then opens
CONNS connections to a1 that write `INFO` lines as fast as a1 takes them and
never read a reply. Meanwhile:

  - a well-behaved client of a1 holds a lock and sends `ALIVE` every 20 ms:
    its round trips (the longest is a1's worst stall as a client sees it)
    and the `valid_for` of the replies, whose shortfall from `grace` is how
    long a1 last went without hearing the cluster's heartbeat;
  - a2 is asked `INFO` every 100 ms: `connected` drops below 3 when a1 stalls
    long enough for its peers to drop it;
  - a1's resident memory is sampled every 100 ms.

Prints one JSON object. Python 3 standard library only; every wait is
bounded; the agents and the flood process are stopped by pid at the end.
"""

import argparse
import json
import os
import random
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

GRACE = 5.0  # seconds: snaplockd's default `grace`


def connect(path, timeout=5.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s


def request(s, line, want, timeout=5.0):
    """Sends LINE, returns the first reply line starting with WANT."""
    s.sendall(line.encode() + b"\n")
    buf = b""
    deadline = time.monotonic() + timeout
    while True:
        while b"\n" in buf:
            got, buf = buf.split(b"\n", 1)
            got = got.decode(errors="replace")
            if got.startswith(want):
                return got
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no %s for %r" % (want, line))
        s.settimeout(left)
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("closed while waiting for %s" % want)
        buf += chunk


def param(line, name):
    for part in line.split(" ", 1)[-1].split(";"):
        k, _, v = part.partition("=")
        if k == name:
            return v
    return None


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def flood(path, conns, seconds):
    """The hostile side (run in its own process): CONNS connections writing
    INFO as fast as the agent takes them, never reading."""
    socks = []
    for _ in range(conns):
        try:
            s = connect(path)
        except OSError:
            break
        s.setblocking(False)
        socks.append(s)
    print("connected %d" % len(socks), file=sys.stderr, flush=True)
    chunk = b"INFO\n" * 13000
    poller = select.poll()
    by_fd = {}
    for s in socks:
        poller.register(s, select.POLLOUT)
        by_fd[s.fileno()] = s
    end = time.monotonic() + seconds
    while time.monotonic() < end and by_fd:
        for fd, ev in poller.poll(100):
            s = by_fd.get(fd)
            if s is None:
                continue
            try:
                if ev & (select.POLLERR | select.POLLHUP):
                    raise OSError("closed")
                s.send(chunk)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                poller.unregister(fd)
                del by_fd[fd]
    socks = list(by_fd.values())
    print("open at the end %d" % len(socks), file=sys.stderr, flush=True)
    for s in socks:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--snaplockd", required=True)
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--agent-args", default="", help="extra options of a1")
    ap.add_argument("--flood", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.flood:
        flood(a.flood, a.conns, a.seconds)
        return

    work = tempfile.mkdtemp(prefix="snaplock-hostile.")
    base = 20000 + random.randrange(20000)
    addrs = ["127.0.0.1:%d" % (base + i) for i in range(3)]
    procs = []
    try:
        for i in range(3):
            args = [a.snaplockd, "--socket", "%s/a%d.sock" % (work, i + 1),
                    "--server-name", "a%d" % (i + 1), "--log-level", "warn",
                    "--listen", addrs[i], "--neighbors", ",".join(addrs)]
            if i == 0 and a.agent_args:
                args += a.agent_args.split()
            log = open("%s/a%d.log" % (work, i + 1), "w")
            procs.append(subprocess.Popen(args, stdout=log, stderr=log))
        socks = ["%s/a%d.sock" % (work, i + 1) for i in range(3)]
        deadline = time.monotonic() + 30
        good = None
        while time.monotonic() < deadline:
            try:
                good = connect(socks[0])
                request(good, "LOCK object_name=held;duration=3600;tag=1", "LOCKED", 2.0)
                break
            except (OSError, TimeoutError, EOFError):
                good = None
                time.sleep(0.2)
        if good is None:
            sys.exit("the cluster did not grant a lock within 30 s")
        witness = connect(socks[1])

        stop = threading.Event()
        rtts, valid, connected, rss, slow = [], [], [], [], []
        flood_start = [time.monotonic() + 1.0]

        def alive_loop():
            serial = 0
            while not stop.is_set():
                serial += 1
                t0 = time.monotonic()
                try:
                    r = request(good, "ALIVE serial=%d" % serial, "ABSOLUTELY", 120.0)
                except (OSError, TimeoutError, EOFError) as e:
                    rtts.append(("error", str(e)))
                    return
                rtts.append(time.monotonic() - t0)
                if rtts[-1] > 0.1:
                    slow.append((round(t0 - flood_start[0], 2), round(1000 * rtts[-1])))
                v = param(r, "valid_for")
                if v is not None:
                    valid.append(float(v))
                time.sleep(0.02)

        def watch_loop():
            while not stop.is_set():
                try:
                    r = request(witness, "INFO", "STATUS", 5.0)
                    connected.append(int(param(r, "connected") or 0))
                except (OSError, TimeoutError, EOFError, ValueError):
                    connected.append(-1)
                rss.append(rss_kb(procs[0].pid))
                time.sleep(0.1)

        threads = [threading.Thread(target=alive_loop), threading.Thread(target=watch_loop)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        baseline = (len(rtts), len(valid))
        flood_start[0] = time.monotonic()
        hostile = subprocess.Popen([sys.executable, __file__, "--snaplockd", a.snaplockd,
                                    "--conns", str(a.conns), "--seconds", str(a.seconds),
                                    "--flood", socks[0]])
        try:
            hostile.wait(timeout=a.seconds + 60)
        except subprocess.TimeoutExpired:
            hostile.kill()
            hostile.wait()
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(timeout=150)
        # The lock must still be held: a lost lock arrives as UNLOCKED.
        try:
            still = request(good, "LOCKSTATUS", "LOCK", 60.0).split(" ")[0]
        except (OSError, TimeoutError, EOFError) as e:
            still = "no answer: %s" % e
        loaded = [x for x in rtts[baseline[0]:] if not isinstance(x, tuple)]
        loaded_valid = valid[baseline[1]:]
        out = {
            "conns": a.conns,
            "seconds": a.seconds,
            "alive_round_trips": len(loaded),
            "alive_max_ms": round(1000 * max(loaded), 1) if loaded else None,
            "alive_p99_ms": round(1000 * sorted(loaded)[int(0.99 * (len(loaded) - 1))], 1) if loaded else None,
            "alive_errors": [x for x in rtts if isinstance(x, tuple)],
            "alive_over_100ms": slow,
            "heartbeat_gap_max_ms": round(1000 * (GRACE - min(loaded_valid)), 1) if loaded_valid else None,
            "heartbeat_gap_before_ms": round(1000 * (GRACE - min(valid[:baseline[1]])), 1) if baseline[1] else None,
            "peer_connected_min": min(connected) if connected else None,
            "rss_max_mb": round(max(rss) / 1024, 1) if rss else None,
            "good_client_lockstatus": still,
            "a1_alive": procs[0].poll() is None,
        }
        print(json.dumps(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
