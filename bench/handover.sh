#!/usr/bin/env bash
# bench/handover.sh: how many held locks survive a failover.
#
#   bench/handover.sh [N...]            default: 100000 300000 600000 1000000
#
# For each N: three snaplockd agents on loopback; snaplock-hold takes N
# exclusive locks (one hour leases) through agent a3; then a leader other
# than a3 is killed with SIGKILL. Measured: the seconds from the SIGKILL
# to the next grant of a fresh name on the surviving agent that is not
# a3, whether a3 revoked its clients' locks (its log says so), and
# whether a sample of the held names (every N/20th) is still busy for a
# client of that agent, and, from the survivors' logs, when each of them
# was acting in the new epoch (`leading with`, seconds after the SIGKILL).
# One JSON line per N goes to OUT and to stdout.
#
# Environment: PORT_BASE [15200]  OUT [bench/results/handover-<UTC time>.jsonl]
#   AGENT_LOG [info] (the agents' --log-level)  AGENT_ARGS (other snaplockd options)
#   BIN_DIR (snaplockd, snaplock-cli and snaplock-hold of another build;
#   default: this tree's, built)  KEEP_LOGS (a directory: each trial's logs
#   are copied there)
# Everything listens on 127.0.0.1 only and lives in a temporary
# directory; every process is stopped by its pid on exit; every wait is
# bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
PORT_BASE=${PORT_BASE:-15200}
mkdir -p bench/results
OUT=${OUT:-$top/bench/results/handover-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
[ $# -gt 0 ] || set -- 100000 300000 600000 1000000

if [ -n "${BIN_DIR:-}" ]; then
    bin=$BIN_DIR
else
    # One build per package: `--bin` would narrow every package given with it.
    cargo build --release --quiet -p snaplock-agent -p snaplock-cli
    cargo build --release --quiet -p snaplock-tests --bin snaplock-hold
    bin=$top/target/release
fi
clock() { date +%s.%N; }
since() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 3))" "$1" "$(clock)"; }
epoch_of() { "$bin/snaplock-cli" --socket "$1" info 2>/dev/null | awk -F': ' '/^epoch/ {print $2}'; }

PIDS=()
work=""
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -z "$work" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

trial() {
    local n=$1 i dir nb="" leaders victim other e0 e t0 hp started busy=0 tried=0 k rc granted=null revoked acting kept
    work=$(mktemp -d /tmp/snaplock-handover.XXXXXX); dir=$work
    PIDS=()
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret"
    chmod 600 "$dir/secret"
    for i in 1 2 3; do nb+="${nb:+,}127.0.0.1:$((PORT_BASE + i))"; done
    for i in 1 2 3; do
        # shellcheck disable=SC2086
        "$bin/snaplockd" --socket "$dir/a$i.sock" -n "a$i" --listen "127.0.0.1:$((PORT_BASE + i))" \
            --neighbors "$nb" --secret-file "$dir/secret" --log-level "${AGENT_LOG:-info}" ${AGENT_ARGS:-} 2> "$dir/a$i.log" &
        PIDS+=($!)
    done
    python3 bench/cluster_tool.py ready --timeout 60 "$dir"/a{1,2,3}.sock > /dev/null
    started=$(clock)
    "$bin/snaplock-hold" --socket "$dir/a3.sock" --locks "$n" --conns 16 --hold 900 \
        > "$dir/hold.json" 2> "$dir/hold.err" &
    hp=$!; PIDS+=("$hp")
    for k in $(seq 900); do
        [ -s "$dir/hold.json" ] && break
        kill -0 "$hp" 2>/dev/null || { cat "$dir/hold.err" >&2; return 1; }
        sleep 1
    done
    [ -s "$dir/hold.json" ] || { echo "snaplock-hold did not finish" >&2; return 1; }
    leaders=$("$bin/snaplock-cli" --socket "$dir/a1.sock" info | awk -F': ' '/^leaders/ {print $2}')
    victim=1; case ",$leaders," in *",a1,"*) ;; *) victim=2 ;; esac
    other=$((3 - victim))
    e0=$(epoch_of "$dir/a$other.sock")
    # Agents up for less than the lock-delay do not vouch for the new
    # epoch's state (docs/cluster.md): measure agents up for longer.
    sleep "$(python3 -c "import sys; print(max(0.0, 8 - (float(sys.argv[2]) - float(sys.argv[1]))))" "$started" "$(clock)")"
    t0=$(clock)
    kill -9 "${PIDS[$((victim - 1))]}"
    for k in $(seq 600); do
        e=$(epoch_of "$dir/a$other.sock")
        [ -n "$e" ] && [ "$e" != "$e0" ] && break
        sleep 0.1
    done
    for k in $(seq 12); do
        rc=0; "$bin/snaplock-cli" --socket "$dir/a$other.sock" lock -w 10 "fresh-$k" -- true 2>/dev/null || rc=$?
        if [ "$rc" = 0 ]; then granted=$(since "$t0"); break; fi
    done
    for k in $(seq 0 $((n / 20)) $((n - 1))); do
        tried=$((tried + 1)); rc=0
        "$bin/snaplock-cli" --socket "$dir/a$other.sock" lock -n "$(printf 'hold-%08d' "$k")" -- true 2>/dev/null || rc=$?
        [ "$rc" != 1 ] || busy=$((busy + 1))
    done
    revoked=false; grep -q "revoking every lock" "$dir/a3.log" && revoked=true
    # When each survivor first logged `leading with` after the SIGKILL
    # (null when it did not, or logs below info).
    acting=$(python3 - "$t0" "$dir/a$other.log" "$dir/a3.log" <<'PY'
import datetime, json, re, sys
t0 = float(sys.argv[1])
out = {}
for path in sys.argv[2:]:
    name = re.search(r"(a\d)\.log$", path).group(1)
    out[name] = None
    for line in open(path, errors="replace"):
        m = re.match(r"\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z ", line)
        if not m or "leading with" not in line:
            continue
        t = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
        if t >= t0:
            out[name] = round(t - t0, 3)
            break
print(json.dumps(out, separators=(",", ":")))
PY
)
    if [ -n "${KEEP_LOGS:-}" ]; then
        kept="$KEEP_LOGS/$n-$(date -u +%Y%m%dT%H%M%SZ)"
        mkdir -p "$kept" && cp "$dir"/a*.log "$kept/" || true
    fi
    printf '{"locks":%s,"victim":"a%s","next_grant_s":%s,"home_revoked":%s,"acting_s":%s,"sample_still_held":%s,"sample":%s,"hold":%s}\n' \
        "$n" "$victim" "$granted" "$revoked" "$acting" "$busy" "$tried" "$(cat "$dir/hold.json")" | tee -a "$OUT"
    cleanup; PIDS=(); work=""
}

for n in "$@"; do trial "$n"; done
echo "results in $OUT" >&2
