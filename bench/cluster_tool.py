#!/usr/bin/env python3
"""Helpers of bench/cluster.sh (Python 3 standard library only).

  ready SOCK...            wait until every agent answers LOCKSTATUS with LOCKREADY
  info SOCK                print the agent's INFO reply as JSON
  quiet                    wait (bounded) until the machine is quiet
  measure -- CMD...        run one load-generator command, append its records,
                           annotated with the machine's load, to --out
  failover                 one failover trial (SIGKILL of a leader, time to the
                           next grant), one JSON line appended to --out
  report FILE...           Markdown tables of the median runs and the targets

Every wait is bounded; every socket has a timeout.
"""

import argparse
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid


# --------------------------------------------------------------- protocol --

def parse_line(line):
    """(command, params) of one reply line of the snaplock grammar: enough
    for replies (values are never quoted by the agent in what we read)."""
    line = line.rstrip("\r\n")
    if line.startswith("<"):
        line = line.partition(" ")[2]
    word, _, rest = line.partition(" ")
    cmd = word.replace(":", "/").rpartition("/")[2]
    params = {}
    while rest:
        name, eq, rest = rest.partition("=")
        if not eq:
            break
        if rest.startswith('"'):
            i = 1
            while i < len(rest) and not (rest[i] == '"' and rest[i - 1] != "\\"):
                i += 1
            value, rest = rest[1:i].replace('\\"', '"'), rest[i + 1:]
            rest = rest[1:] if rest.startswith(";") else rest
        else:
            value, _, rest = rest.partition(";")
        params[name] = value.replace("\\n", "\n").replace("\\r", "\r").replace("\\\\", "\\")
    return cmd, params


class Conn:
    """One client connection with a line buffer; reads are bounded by time."""

    def __init__(self, path, timeout=5.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.s.setblocking(False)
        self.buf = b""
        self.eof = False
        self.tag = 0

    def send(self, line):
        self.s.setblocking(True)
        try:
            self.s.sendall(line.encode() + b"\n")
        finally:
            self.s.setblocking(False)

    def request(self, cmd, **params):
        """Sends CMD with a new tag; returns the tag (as text)."""
        self.tag += 1
        params["tag"] = self.tag
        body = ";".join("%s=%s" % (k, params[k]) for k in sorted(params))
        self.send("%s %s" % (cmd, body))
        return str(self.tag)

    def fill(self):
        """Reads what is there without blocking; sets eof on a closed peer."""
        while True:
            try:
                chunk = self.s.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.eof = True
                return
            if not chunk:
                self.eof = True
                return
            self.buf += chunk

    def lines(self):
        out = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            out.append(line.decode(errors="replace"))
        return out

    def read_until(self, want, deadline):
        """Reads lines until want(cmd, params) holds; returns (cmd, params,
        line) or None at the deadline or end of file."""
        while True:
            for line in self.lines():
                cmd, p = parse_line(line)
                if want(cmd, p):
                    return cmd, p, line
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            select.select([self.s], [], [], min(left, 0.5))
            self.fill()

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def ask(path, cmd, replies, timeout=2.0):
    """One request on a fresh connection; the first reply whose command is in
    `replies` as (cmd, params), or None."""
    c = Conn(path, timeout)
    try:
        c.send(cmd)
        got = c.read_until(lambda k, _p: k in replies, time.monotonic() + timeout)
        return None if got is None else got[:2]
    finally:
        c.close()


def info(path):
    got = ask(path, "INFO", ("STATUS",))
    return None if got is None else got[1]


def lock_status(path):
    try:
        got = ask(path, "LOCKSTATUS", ("LOCKREADY", "NOLOCK"), 1.0)
    except OSError as e:
        return "down (%s)" % e.strerror
    return "no answer" if got is None else got[0]


# ------------------------------------------------------------------ ready --

def cmd_ready(a):
    t0 = time.monotonic()
    deadline = t0 + a.timeout
    while True:
        states = {p: lock_status(p) for p in a.sockets}
        if all(s == "LOCKREADY" for s in states.values()):
            print("ready after %.2f s" % (time.monotonic() - t0))
            return 0
        if time.monotonic() >= deadline:
            for p, s in states.items():
                print("%s: %s" % (p, s), file=sys.stderr)
            return 1
        time.sleep(0.1)


def cmd_info(a):
    print(json.dumps(info(a.socket), sort_keys=True))
    return 0


# ---------------------------------------------------------------- measure --

def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def machine_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v) - v[3] - v[4], sum(v)


def proc_jiffies(pids):
    tot = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            tot += int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            pass
    return tot


def busy_pct(seconds):
    """Share of all cores that was busy over the next `seconds`."""
    m0 = machine_jiffies()
    time.sleep(seconds)
    m1 = machine_jiffies()
    return round(100.0 * (m1[0] - m0[0]) / max(1, m1[1] - m0[1]), 1)


def wait_quiet(pct, wait_s):
    """Waits, at most wait_s, until the machine is less than pct % busy over
    one second (the servers are idle then, so what is busy is someone
    else's); returns (busy % of the last sample, seconds waited)."""
    t0 = time.monotonic()
    while True:
        b = busy_pct(1.0)
        if b < pct or time.monotonic() - t0 >= wait_s:
            return b, round(time.monotonic() - t0, 1)
        print("measure: machine %.0f%% busy, waiting for a quieter moment" % b, file=sys.stderr)
        time.sleep(4.0)


def normalize(rec):
    """Adds the fields the report reads, whichever tool wrote the record:
    ops_per_s, op_p50_us/op_p99_us (lock+unlock) and acq_p50_us/acq_p99_us
    (lock alone: the wait for the name under contention)."""
    for k in ("op", "acq"):
        for q in ("p50", "p99"):
            us, ms = "%s_%s_us" % (k, q), "%s_%s_ms" % (k, q)
            if us not in rec and rec.get(ms) is not None:
                rec[us] = round(rec[ms] * 1000.0, 1)
    if "client_cpu_cores" not in rec and rec.get("client_cpu_s") is not None and rec.get("elapsed_s"):
        rec["client_cpu_cores"] = round(rec["client_cpu_s"] / rec["elapsed_s"], 3)
    busy = rec.get("machine_busy_pct", rec.get("machine_busy_pct_span"))
    if busy is not None and rec.get("client_cpu_cores") is not None:
        # what neither the load generator nor the servers used: other
        # processes, plus the kernel's softirq work for loopback traffic
        rec["other_cpu_cores"] = round(busy / 100.0 * (os.cpu_count() or 1)
                                       - rec["client_cpu_cores"]
                                       - (rec.get("server_cpu_cores") or 0.0), 2)
    return rec


def cmd_quiet(a):
    busy, waited = wait_quiet(a.quiet_pct, a.quiet_wait)
    print("quiet: machine %.0f%% busy after %.0f s of waiting" % (busy, waited), file=sys.stderr)
    return 0


def cmd_measure(a):
    extra = dict(kv.split("=", 1) for kv in a.set)
    pids = [int(x) for x in a.server_pids.split(",") if x.strip()]
    cmd = list(a.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    tmp = None
    if a.format == "lockbench":
        tmp = "%s.part-%d" % (a.out, os.getpid())
        cmd += ["--out", tmp]
    quiet = wait_quiet(a.quiet_pct, a.quiet_wait) if a.quiet_wait > 0 else (None, 0)
    load0, m0, s0, w0 = loadavg(), machine_jiffies(), proc_jiffies(pids), time.monotonic()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, timeout=a.timeout)
        rc = proc.returncode
        stdout = proc.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, stdout = 124, ""
    m1, s1, w1 = machine_jiffies(), proc_jiffies(pids), time.monotonic()
    if a.format == "lockbench":
        sys.stdout.write(stdout)
        lines = open(tmp).read().splitlines() if tmp and os.path.exists(tmp) else []
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    else:
        lines = [l for l in stdout.splitlines() if l.startswith("{")]
    hz = os.sysconf("SC_CLK_TCK")
    with open(a.out, "a") as out:
        for line in lines:
            rec = normalize(json.loads(line))
            rec.update(extra)
            rec["loadavg_before"] = load0
            rec["busy_pct_before"], rec["quiet_waited_s"] = quiet
            rec["exit_status"] = rc
            rec["machine_busy_pct_span"] = (round(100.0 * (m1[0] - m0[0]) / (m1[1] - m0[1]), 1)
                                            if m1[1] > m0[1] else None)
            if pids and "server_cpu_cores" not in rec:
                rec["server_cpu_cores"] = round((s1 - s0) / hz / max(w1 - w0, 1e-9), 3)
            out.write(json.dumps(rec, sort_keys=True) + "\n")
    if not lines:
        print("measure: no record from %s (exit %d)" % (" ".join(cmd[:3]), rc), file=sys.stderr)
        return 1
    return 0 if rc in (0, 3) else rc


# --------------------------------------------------------------- failover --

def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def agent_of(leader, agents):
    """The agent a `leaders=` item names: an id PP|RANDOM|ADDRESS|PID|NAME or
    a bare name; matched by name, then pid, then listen address."""
    parts = leader.split("|")
    for ag in agents:
        if parts[-1] == ag["name"]:
            return ag
    for ag in agents:
        if str(ag["pid"]) in parts or (ag.get("addr") and ag["addr"] in parts):
            return ag
    return None


def parse_agents(spec):
    """NAME=SOCKET=PID[=ADDR],... as cluster.sh passes them."""
    out = []
    for item in spec.split(","):
        f = item.split("=")
        out.append({"name": f[0], "socket": f[1], "pid": int(f[2]),
                    "addr": f[3] if len(f) > 3 else None})
    return out


class StatusWatch(threading.Thread):
    """Polls LOCKSTATUS on the given agents every `period` s and records
    every change of answer with its time since t0 (ms), until stopped."""

    def __init__(self, agents, t0, period=0.02, limit_s=120.0):
        super().__init__(daemon=True)
        self.agents, self.t0, self.period = agents, t0, period
        self.until = time.monotonic() + limit_s
        self.stop = threading.Event()
        self.changes = {ag["name"]: [] for ag in agents}

    def run(self):
        last = {}
        while not self.stop.is_set() and time.monotonic() < self.until:
            for ag in self.agents:
                s = lock_status(ag["socket"])
                if last.get(ag["name"]) != s:
                    last[ag["name"]] = s
                    self.changes[ag["name"]].append(
                        [round((time.monotonic() - self.t0) * 1000.0, 1), s])
            self.stop.wait(self.period)


def process_age(pid):
    """Seconds since process `pid` started (None when it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except OSError:
        return None
    return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")


def cmd_failover(a):
    agents = parse_agents(a.agents)
    rec = {"tool": "failover", "scenario": a.scenario, "agents": len(agents),
           "loadavg_before": loadavg(), "ok": False}
    rec.update(dict(kv.split("=", 1) for kv in a.set))
    # An agent up for less than the lock-delay does not vouch for a new
    # epoch's state (docs/cluster.md): a failover right after the start
    # waits the lock-delay. Measured here is the failover of agents that
    # have been up a while.
    ages = [process_age(ag["pid"]) for ag in agents]
    if all(x is not None for x in ages) and min(ages) < a.warm:
        time.sleep(a.warm - min(ages))
    rec["warm_s"] = a.warm

    sig = signal.SIGSTOP if a.signal == "stop" else signal.SIGKILL
    rec["signal"] = a.signal
    stopped = []

    def finish(error=None):
        # A paused victim is let go, so that the harness can stop it by pid.
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        if error:
            rec["error"] = error
            print("failover: %s" % error, file=sys.stderr)
        with open(a.out, "a") as out:
            out.write(json.dumps(rec, sort_keys=True) + "\n")
        print("%-14s victim=%s grant after %s ms%s" % (
            a.scenario, rec.get("victim"), rec.get("grant_ms"),
            "" if rec["ok"] else "  (FAILED: %s)" % rec.get("error")), file=sys.stderr)
        return 0 if rec["ok"] else 1

    before = {ag["name"]: info(ag["socket"]) for ag in agents}
    if any(v is None for v in before.values()):
        return finish("an agent did not answer INFO")
    first = before[agents[0]["name"]]
    leaders = [x for x in first.get("leaders", "").split(",") if x]
    rec["leaders_before"], rec["epoch_before"] = first.get("leaders"), first.get("epoch")
    rec["epochs_before"] = sorted({v.get("epoch") for v in before.values()})
    name = "failover-%s" % uuid.uuid4().hex[:12]
    rec["object_name"] = name
    if not leaders:
        return finish("INFO names no leaders")
    owner = leaders[fnv1a64(name.encode()) % len(leaders)]
    pick = {"owner": owner, "leader0": leaders[0]}.get(a.victim)
    victim = (agent_of(pick, agents) if pick is not None
              else next((ag for ag in agents if ag["name"] == a.victim), None))
    if victim is None:
        return finish("cannot tell which agent %r is (leaders=%s)" % (a.victim, first.get("leaders")))
    rec["victim"], rec["victim_rule"] = victim["name"], a.victim
    rec["victim_owns_object"] = agent_of(owner, agents) is victim
    survivors = [ag for ag in agents if ag is not victim]
    if not survivors:
        return finish("no agent would survive: run with at least 2 agents")
    if a.scenario == "held-survivor" and len(survivors) < 2:
        return finish("held-survivor needs 2 survivors (3 agents)")
    budget = a.budget
    dur = max(60, int(budget) + 30)
    waiter = Conn(survivors[0]["socket"])
    rec["waiter_on"] = survivors[0]["name"]
    holder = None
    conns = [waiter]
    try:
        if a.scenario != "free":
            home = victim if a.scenario == "held-victim" else survivors[1]
            rec["holder_on"] = home["name"]
            holder = Conn(home["socket"])
            conns.append(holder)
            htag = holder.request("LOCK", object_name=name, pid=os.getpid(), duration=dur,
                                  timeout="%.3f" % (time.time() + 10))
            got = holder.read_until(lambda k, p: k in ("LOCKED", "LOCKFAILED") and p.get("tag") == htag,
                                    time.monotonic() + 15)
            if got is None or got[0] != "LOCKED":
                return finish("the holder did not get the lock: %s" % (got and got[2]))
            rec["holder_fence"] = int(got[1].get("fence", "0") or 0)
            wtag = waiter.request("LOCK", object_name=name, pid=os.getpid() + 1, duration=dur,
                                  timeout="%.3f" % (time.time() + budget + 5))
            early = waiter.read_until(lambda k, p: k in ("LOCKED", "LOCKFAILED") and p.get("tag") == wtag,
                                      time.monotonic() + a.settle)
            if early is not None:
                return finish("the waiter was answered while the lock was held: %s" % early[2])
        watch = StatusWatch(survivors, time.monotonic(), limit_s=budget + 5)
        t0 = time.monotonic()
        watch.t0 = t0
        os.kill(victim["pid"], sig)
        if sig == signal.SIGSTOP:
            stopped.append(victim["pid"])
        watch.start()
        ms = lambda: round((time.monotonic() - t0) * 1000.0, 2)
        if a.scenario == "held-survivor":
            utag = holder.request("UNLOCK", object_name=name, pid=os.getpid())
        if a.scenario == "free":
            wtag = waiter.request("LOCK", object_name=name, pid=os.getpid() + 1, duration=dur,
                                  timeout="%.3f" % (time.time() + budget))
        deadline = t0 + budget
        refusals = []
        grant = None
        while grant is None and time.monotonic() < deadline and len(refusals) < 1000:
            for c in conns:
                c.fill()
            for line in waiter.lines():
                cmd, p = parse_line(line)
                if p.get("tag") != wtag or cmd not in ("LOCKED", "LOCKFAILED"):
                    continue
                if cmd == "LOCKED":
                    grant = (ms(), p)
                    break
                refusals.append([ms(), p.get("error")])
                time.sleep(0.01)
                wtag = waiter.request("LOCK", object_name=name, pid=os.getpid() + 1, duration=dur,
                                      timeout="%.3f" % (time.time() + max(1.0, deadline - time.monotonic())))
            if holder is not None:
                for line in holder.lines():
                    cmd, p = parse_line(line)
                    if cmd == "UNLOCKED" and p.get("error"):
                        rec.setdefault("holder_lost_ms", ms())
                        rec["holder_lost_error"] = p.get("error")
                    elif cmd in ("UNLOCKED", "LOCKFAILED") and a.scenario == "held-survivor" \
                            and p.get("tag") == utag:
                        rec["unlock_reply_ms"], rec["unlock_reply"] = ms(), line
                if holder.eof and "holder_eof_ms" not in rec:
                    rec["holder_eof_ms"] = ms()
            if waiter.eof:
                return finish("the waiter's agent closed the connection")
            if grant is None:
                select.select([c.s for c in conns if not c.eof], [], [], 0.005)
        watch.stop.set()
        watch.join(2)
        rec["lockfailed"] = refusals
        rec["survivor_lockstatus"] = watch.changes
        if grant is None:
            return finish("no grant within %.0f s of the kill" % budget)
        rec["grant_ms"] = grant[0]
        rec["waiter_fence"] = int(grant[1].get("fence", "0") or 0)
        after = info(survivors[0]["socket"]) or {}
        rec["leaders_after"], rec["epoch_after"] = after.get("leaders"), after.get("epoch")
        if "holder_fence" in rec and rec["waiter_fence"] <= rec["holder_fence"]:
            return finish("fence did not grow: %d after %d" % (rec["waiter_fence"], rec["holder_fence"]))
        rec["ok"] = True
        return finish()
    finally:
        for c in conns:
            c.close()


# ----------------------------------------------------------------- report --

WORKLOADS = [("uncontended", 1), ("distinct", 16), ("distinct", 64), ("contended", 16)]


def median(runs):
    runs = sorted(runs, key=lambda r: r["ops_per_s"])
    return runs[(len(runs) - 1) // 2]


def us(v):
    return "-" if v is None else "{:,.0f}".format(v)


def cmd_report(a):
    recs = []
    for path in a.files:
        with open(path) as f:
            recs.extend(json.loads(l) for l in f if l.strip())
    load = [r for r in recs if r.get("tool") != "failover" and "ops_per_s" in r]
    groups, systems = {}, []
    for r in load:
        s = r.get("system", r.get("label", "?"))
        if s not in systems:
            systems.append(s)
        groups.setdefault((s, r["workload"], r["clients"]), []).append(normalize(r))
    if load:
        summary(groups, systems)
        print()
        targets(groups, systems)
    fo = [r for r in recs if r.get("tool") == "failover"]
    if fo:
        print("\n| scenario | signal | trials | granted | grant after the signal, ms (each trial) "
              "| median ms | max ms |")
        print("|---|---|---:|---:|---|---:|---:|")
        scs = [x for x in ("free", "held-victim", "held-survivor") if any(r["scenario"] == x for r in fo)] + \
            sorted({r["scenario"] for r in fo} - {"free", "held-victim", "held-survivor"})
        for sc, sig in [(sc, sig) for sig in ("kill", "stop") for sc in scs]:
            rs = [r for r in fo if r["scenario"] == sc and r.get("signal", "kill") == sig]
            if not rs:
                continue
            ok = sorted(r["grant_ms"] for r in rs if r.get("ok"))
            print("| %s | SIG%s | %d | %d | %s | %s | %s |" % (
                sc, sig.upper(), len(rs), len(ok), " / ".join("%.1f" % r["grant_ms"] for r in rs if r.get("ok")),
                "%.1f" % ok[(len(ok) - 1) // 2] if ok else "-", "%.1f" % ok[-1] if ok else "-"))
            for r in rs:
                if not r.get("ok"):
                    print("|  |  | failed: %s |  |  |  |  |" % r.get("error"))
    if load:
        print("\nDetails of every cell:\n")
        print("| system | driver | workload | clients | runs | ops/s (median run) | ops/s of the runs "
              "| lock+unlock p50 / p99 µs | lock wait p50 / p99 µs | overlaps | fence viol. "
              "| timeouts/errors/lost | busy before % | other CPU, cores | load avg (1 min) before |")
        print("|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---|---|---|")
        for s in systems:
            for wl, c in WORKLOADS:
                runs = groups.get((s, wl, c))
                if not runs:
                    continue
                m = median(runs)
                fv = [r.get("fence_violations") for r in runs if r.get("fence_violations") is not None]
                print("| %s | %s | %s | %d | %d | %.0f | %s | %s / %s | %s / %s | %d | %s | %d/%d/%d | %s | %s | %s |" % (
                    s, "lockgen" if m.get("tool") == "lockgen" else "lockbench.py",
                    wl, c, len(runs), m["ops_per_s"],
                    " / ".join("%.0f" % r["ops_per_s"] for r in runs),
                    us(m.get("op_p50_us")), us(m.get("op_p99_us")),
                    us(m.get("acq_p50_us")), us(m.get("acq_p99_us")),
                    sum(r.get("overlaps", 0) for r in runs), sum(fv) if fv else "-",
                    sum(r.get("timeouts", 0) for r in runs), sum(r.get("errors", 0) for r in runs),
                    sum(r.get("lost", 0) for r in runs),
                    " / ".join("%s" % r.get("busy_pct_before", "-") for r in runs),
                    " / ".join("%s" % r.get("other_cpu_cores") for r in runs),
                    " / ".join("%.2f" % r["loadavg_before"][0] for r in runs if r.get("loadavg_before"))))
    return 0


def summary(groups, systems):
    """One row per workload and system: the median run's throughput and
    lock+unlock latency, and its throughput against etcd's and Redis's."""
    etcd = next((s for s in systems if s.startswith("etcd")), None)
    redis = next((s for s in systems if s.startswith("redis")), None)
    print("| workload | system | ops/s (median run) | ops/s of the runs | p50 µs | p99 µs "
          "| × etcd | × Redis |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    for wl, c in WORKLOADS:
        for s in systems:
            runs = groups.get((s, wl, c))
            if not runs:
                continue
            m = median(runs)
            ratio = []
            for peer in (etcd, redis):
                p = median(groups[(peer, wl, c)]) if peer and (peer, wl, c) in groups else None
                ratio.append("%.2f" % (m["ops_per_s"] / p["ops_per_s"]) if p and p["ops_per_s"] else "-")
            print("| %s%d client%s | %s | %s | %s | %s | %s | %s | %s |" % (
                {"distinct": "distinct names, ", "contended": "one name, "}.get(wl, ""),
                c, "" if c == 1 else "s", s,
                "{:,.0f}".format(m["ops_per_s"]),
                " / ".join("{:,.0f}".format(r["ops_per_s"]) for r in runs),
                us(m.get("op_p50_us")), us(m.get("op_p99_us")), ratio[0], ratio[1]))


def targets(groups, systems):
    """The issue's targets, where the systems they compare were measured."""
    snap = next((s for s in systems if s.startswith("snaplock")), None)
    etcd = next((s for s in systems if s.startswith("etcd")), None)
    redis = next((s for s in systems if s.startswith("redis")), None)
    if snap is None:
        return
    get = lambda s, wl, c: median(groups[(s, wl, c)]) if s and (s, wl, c) in groups else None
    rows = []
    for wl, c in [("distinct", 16), ("distinct", 64)]:
        m = get(snap, wl, c)
        for peer, want in ((etcd, 20.0), (redis, 1.0)):
            p = get(peer, wl, c)
            if m and p and p["ops_per_s"]:
                r = m["ops_per_s"] / p["ops_per_s"]
                rows.append(("%s %d: %s / %s throughput" % (wl, c, snap, peer), "%.2f×" % r,
                             ">= %g×" % want, r >= want))
    m, p = get(snap, "contended", 16), get(etcd, "contended", 16)
    if m and p and p["ops_per_s"]:
        r = m["ops_per_s"] / p["ops_per_s"]
        rows.append(("contended 16: %s / %s handoffs" % (snap, etcd), "%.2f×" % r, ">= 30×", r >= 30))
    for wl, c in WORKLOADS[:3]:
        m = get(snap, wl, c)
        if m and m.get("op_p50_us") is not None:
            rows.append(("%s %d: %s lock+unlock p50" % (wl, c, snap), "%.0f µs" % m["op_p50_us"],
                         "<= 400 µs", m["op_p50_us"] <= 400))
    if rows:
        print("| target | measured | wanted | met |")
        print("|---|---:|---:|---|")
        for what, got, want, met in rows:
            print("| %s | %s | %s | %s |" % (what, got, want, "yes" if met else "**no**"))
        print("\nEach client has one request in flight, so with N clients the median "
              "lock+unlock is about N / throughput: p50 <= 400 µs needs 40k ops/s at 16 "
              "clients and 160k ops/s at 64.")


# ------------------------------------------------------------------- main --

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ready")
    p.add_argument("sockets", nargs="+")
    p.add_argument("--timeout", type=float, default=30.0)
    p.set_defaults(func=cmd_ready)
    p = sub.add_parser("info")
    p.add_argument("socket")
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("quiet")
    p.add_argument("--quiet-pct", type=float, default=30.0)
    p.add_argument("--quiet-wait", type=float, default=120.0)
    p.set_defaults(func=cmd_quiet)
    p = sub.add_parser("measure")
    p.add_argument("--out", required=True)
    p.add_argument("--format", choices=["lockgen", "lockbench"], default="lockgen")
    p.add_argument("--set", action="append", default=[], help="k=v added to every record")
    p.add_argument("--server-pids", default="")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--quiet-pct", type=float, default=30.0,
                   help="start only when the machine is less busy than this (%% of all cores)")
    p.add_argument("--quiet-wait", type=float, default=0.0,
                   help="longest wait for such a moment, seconds (0: do not wait or sample)")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_measure)
    p = sub.add_parser("failover")
    p.add_argument("--agents", required=True, help="NAME=SOCKET=PID[=ADDR],...")
    p.add_argument("--scenario", choices=["free", "held-victim", "held-survivor"], required=True)
    p.add_argument("--victim", default="owner",
                   help="owner (leader owning the test name), leader0, or an agent name")
    p.add_argument("--budget", type=float, default=60.0, help="seconds to wait for the grant")
    p.add_argument("--signal", choices=["kill", "stop"], default="kill",
                   help="kill: SIGKILL of the victim; stop: SIGSTOP (silent: its links stay open), "
                        "SIGCONT once the trial ends")
    p.add_argument("--warm", type=float, default=8.0,
                   help="seconds every agent must have been up before the kill (lock-delay)")
    p.add_argument("--settle", type=float, default=0.3,
                   help="seconds the waiter must stay unanswered before the kill")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_failover)
    p = sub.add_parser("report")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_report)
    a = ap.parse_args()
    sys.exit(a.func(a))


if __name__ == "__main__":
    main()
