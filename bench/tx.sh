#!/usr/bin/env bash
# bench/tx.sh: committed lock transactions per second beside lock+unlock,
# on one agent and on a cluster of three on loopback, in one run.
#
#   bench/tx.sh                       1, 16, 64 clients; one namespace per client, then one shared
#   CLIENTS="16" SECS=3 bench/tx.sh
#
# Then, on each cluster size, the memory of VARS live variables (default
# 10000, the most one connection may hold) set by one connection: the
# agents' VmRSS, all of them together, before and after (a cluster keeps each variable at its home, its owner
# and the follower that voted).
#
# Environment (defaults in brackets): CLIENTS ["1 16 64"]  SECS [5]  AGENTS ["1 3"]
#   PORT_BASE [15000]  OUT [bench/results/tx-<UTC time>.jsonl]
#
# Each figure comes from target/release/snaplock-txbench: closed loop, one
# request in flight per connection, the client blocking on read (as
# lockgen --wait read). A transaction has 3 statements and commits.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
CLIENTS=${CLIENTS:-"1 16 64"}
SECS=${SECS:-5}
AGENTS=${AGENTS:-"1 3"}
PORT_BASE=${PORT_BASE:-15000}
mkdir -p bench/results
OUT=${OUT:-bench/results/tx-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
# One build per package: `--bin` would narrow every package given with it.
cargo build --release -q -p snaplock-agent -p snaplock-cli
cargo build --release -q -p snaplock-tests --bin snaplock-txbench
dir=$(mktemp -d /tmp/snaplock-txbench.XXXXXX)
pids=()
stop() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
trap 'stop; rm -rf "$dir"' EXIT

start() { # start N: N agents, a cluster when N > 1; sets socks, comma-separated
    local n=$1 i neighbors=""
    socks=""
    for ((i = 1; i <= n; i++)); do neighbors+="${neighbors:+,}127.0.0.1:$((PORT_BASE + i))"; done
    for ((i = 1; i <= n; i++)); do
        local args=(--socket "$dir/a$i.sock" --server-name "a$i" --state-dir "$dir" --log-level warn)
        [ "$n" -gt 1 ] && args+=(--listen "127.0.0.1:$((PORT_BASE + i))" --neighbors "$neighbors")
        target/release/snaplockd "${args[@]}" >"$dir/a$i.out" 2>"$dir/a$i.log" &
        pids+=($!)
        socks+="${socks:+,}$dir/a$i.sock"
    done
    for ((i = 1; i <= n; i++)); do
        for _ in $(seq 100); do [ -S "$dir/a$i.sock" ] && break; sleep 0.1; done
    done
    if [ "$n" -gt 1 ]; then # until the first agent says ready
        for _ in $(seq 100); do
            timeout 1 target/release/snaplock-cli --socket "$dir/a1.sock" info 2>/dev/null \
                | grep -q 'ready.*true' && break
            sleep 0.2
        done
    fi
}

for n in $AGENTS; do
    start "$n"
    for c in $CLIENTS; do
        for mode in distinct shared; do
            flag=(); [ "$mode" = shared ] && flag=(--shared)
            target/release/snaplock-txbench --socket "$socks" rate --clients "$c" --secs "$SECS" "${flag[@]}" | tee -a "$OUT"
        done
    done
    rss() { local p t=0; for p in "${pids[@]}"; do t=$((t + $(awk '/^VmRSS/ {print $2}' /proc/"$p"/status))); done; echo "$t"; }
    before=$(rss)
    target/release/snaplock-txbench --socket "${socks%%,*}" memory --vars "${VARS:-10000}" >/dev/null
    sleep 1
    after=$(rss)
    printf '{"measure":"memory","agents":%s,"variables":%s,"rss_before_kib":%s,"rss_after_kib":%s,"bytes_per_variable":%s}\n' \
        "$n" "${VARS:-10000}" "$before" "$after" "$(( (after - before) * 1024 / ${VARS:-10000} ))" | tee -a "$OUT"
    stop
    rm -f "$dir"/*.sock
done
echo "results: $OUT"
