#!/usr/bin/env python3
"""bench/local_table.py RESULTS.jsonl: the table of a bench/local.sh run.

One row per workload and system (label `system/wait`, or `redis`): the
median run by ops/s, its p50/p99 latency (acquire wait for contended,
acquire+release otherwise), and its ratio to Redis and to the floor that
waits the same way, from the same run."""
import json
import sys

recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
groups = {}
for r in recs:
    groups.setdefault((r["workload"], r["clients"]), {}).setdefault(r["label"], []).append(r)


def med(runs):
    runs = sorted(runs, key=lambda r: r["ops_per_s"])
    return runs[(len(runs) - 1) // 2]


def lat(r):
    k = "acq" if r["workload"] == "contended" else "op"
    return r[k + "_p50_us"], r[k + "_p99_us"]


print("| workload | clients | system / wait | ops/s (median) | runs | p50 us | p99 us | × Redis | × floor | overlaps | fence viol. | timeouts+errors |")
print("|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for (wl, c), by in groups.items():
    redis = med(by["redis"])["ops_per_s"] if "redis" in by else None
    for label in sorted(by, key=lambda l: (l.split("/")[-1] if "/" in l else "", l)):
        runs = by[label]
        m = med(runs)
        wait = label.split("/")[1] if "/" in label else None
        floor = by.get("floor/%s" % wait)
        fl = med(floor)["ops_per_s"] if floor else None
        p50, p99 = lat(m)
        print("| %s | %d | %s | %.0f | %s | %.0f | %.0f | %s | %s | %d | %d | %d |" % (
            wl, c, label, m["ops_per_s"],
            " / ".join("%.0f" % r["ops_per_s"] for r in runs), p50, p99,
            "%.2f" % (m["ops_per_s"] / redis) if redis else "–",
            "%.2f" % (m["ops_per_s"] / fl) if fl and wait else "–",
            sum(r["overlaps"] for r in runs), sum(r["fence_violations"] for r in runs),
            sum(r["timeouts"] + r["errors"] for r in runs)))
print("\nmedian of %d runs per cell; each (workload, rep) ran every system in turn"
      % max(len(v) for by in groups.values() for v in by.values()))
