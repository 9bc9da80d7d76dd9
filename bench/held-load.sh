#!/usr/bin/env bash
# bench/held-load.sh: does a cluster keep its throughput while it holds
# many locks for many connections (DESIGN.md §8)?
#
#   bench/held-load.sh [LOCKS [IDLE]]     default: 1000000 10000
#
# Three snaplockd agents on loopback. lockgen (the copy cluster.sh builds,
# which spreads its clients over the agents' sockets) runs 16 clients on
# distinct names for 5 s, twice; then snaplock-hold takes LOCKS exclusive
# locks (one hour leases) through agent a3 over 16 connections and opens
# IDLE more idle connections to a3; lockgen runs three more times while
# all of that is held. One JSON line per lockgen run goes to OUT (and to
# stdout), with "phase" "empty" or "held" and the agents' resident memory.
#
# Environment: PORT_BASE [15300]  OUT [bench/results/held-load-<UTC time>.jsonl]
# Everything listens on 127.0.0.1 only and lives in a temporary directory;
# every process is stopped by its pid on exit; every wait is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
LOCKS=${1:-1000000}
IDLE=${2:-10000}
PORT_BASE=${PORT_BASE:-15300}
mkdir -p bench/results
OUT=${OUT:-$top/bench/results/held-load-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
lockgen=$top/target/lockgen-multi/target/release/lockgen
[ -x "$lockgen" ] || { echo "no $lockgen: run bench/cluster.sh once, it builds it" >&2; exit 1; }
[ "$(ulimit -n)" -gt $((IDLE + 1000)) ] || ulimit -n $((IDLE + 1000)) || {
    echo "needs $((IDLE + 1000)) open files (ulimit -n)" >&2; exit 1; }

# One build per package: `--bin` would narrow every package given with it.
cargo build --release --quiet -p snaplock-agent
cargo build --release --quiet -p snaplock-tests --bin snaplock-hold
bin=$top/target/release

PIDS=()
work=$(mktemp -d /tmp/snaplock-held-load.XXXXXX)
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/secret"
chmod 600 "$work/secret"
nb=""
for i in 1 2 3; do nb+="${nb:+,}127.0.0.1:$((PORT_BASE + i))"; done
for i in 1 2 3; do
    "$bin/snaplockd" --socket "$work/a$i.sock" -n "a$i" --listen "127.0.0.1:$((PORT_BASE + i))" \
        --neighbors "$nb" --secret-file "$work/secret" --log-level warn 2> "$work/a$i.log" &
    PIDS+=($!)
done
agents=("${PIDS[@]}")
python3 bench/cluster_tool.py ready --timeout 60 "$work"/a{1,2,3}.sock > /dev/null
socks="$work/a1.sock,$work/a2.sock,$work/a3.sock"

rss() {
    local p out=""
    for p in "${agents[@]}"; do out+="${out:+,}$(awk '/VmRSS/ {print $2}' "/proc/$p/status")"; done
    echo "[$out]"
}
run() {
    local line
    line=$(timeout 60 "$lockgen" --backend line --socket "$socks" --workload distinct \
        --clients 16 --duration 5 2> /dev/null | tail -1)
    python3 - "$1" "$(rss)" "$line" <<'PY' | tee -a "$OUT"
import json, sys
phase, rss, line = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
keep = ("ops_per_s", "op_p50_us", "op_p99_us", "overlaps", "fence_violations",
        "errors", "timeouts", "lost")
print(json.dumps({"phase": phase, "agents_rss_kib": rss, **{k: line[k] for k in keep}}))
PY
}

timeout 30 "$lockgen" --backend line --socket "$socks" --workload distinct --clients 4 \
    --duration 1 > /dev/null 2>&1 || true
run empty
run empty
"$bin/snaplock-hold" --socket "$work/a3.sock" --locks "$LOCKS" --conns 16 --idle "$IDLE" \
    --hold 600 > "$work/hold.json" 2> "$work/hold.err" &
PIDS+=($!)
for k in $(seq 600); do
    [ -s "$work/hold.json" ] && break
    kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$work/hold.err" >&2; exit 1; }
    sleep 1
done
[ -s "$work/hold.json" ] || { echo "snaplock-hold did not finish" >&2; exit 1; }
echo "held: $(cat "$work/hold.json")" >&2
# The idle connections are opened after that line: wait for a3 to have them.
for k in $(seq 120); do
    [ "$(ls "/proc/${agents[2]}/fd" | wc -l)" -ge "$IDLE" ] && break
    sleep 0.5
done
echo "a3 has $(ls "/proc/${agents[2]}/fd" | wc -l) open files" >&2
run held
run held
run held
echo "results in $OUT" >&2
