#!/usr/bin/env bash
# bench/local.sh: one agent (snaplockd on one computer) against its floor
# (bench/floor `local`) and an in-memory Redis, measured by the shared load
# generator `lockgen` in one run, with each way a client waits.
#
#   bench/local.sh                          floor, snaplock, redis; read and poll
#   DURATION=5 REPS=3 bench/local.sh
#   OLD=/path/to/old/snaplockd bench/local.sh
#                                           adds `snaplock-old`, another build of
#                                           the agent, run alternately with this one
#   SYSTEMS="floor snaplock" WAITS=poll WORKLOADS="distinct:16" bench/local.sh
#
# Environment (defaults in brackets): DURATION [5] REPS [3]
# WORKLOADS ["uncontended:1 distinct:16 distinct:64 contended:16"]
# WAITS ["read poll"] (lockgen --wait of the line clients; Redis has one way)
# SYSTEMS ["floor snaplock redis", plus snaplock-old with OLD]
# REDIS_PORT [16392] OUT [bench/results/local-<UTC time>.jsonl]
# SERVER_CPUS, CLIENT_CPUS [unset]: taskset CPU lists for the systems and
# for lockgen (one client's latency depends on whether it shares a CPU
# with its server: a wake-up across CPUs costs more than a switch on one)
#
# Every (workload, rep) runs each system in turn, so a slower moment of the
# machine falls on all of them. The floor is not a lock service: one process
# that answers LOCK and UNLOCK with nothing between them (bench/floor
# `local`), which no agent can beat. Each system runs in its own process,
# started here and stopped by its pid on any exit; each lockgen run is
# bounded by DURATION and `timeout`. Exit status: 0, or 3 if any run
# reported overlaps or fence violations, or 1 on a failed run.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
shared=${SHARED:-$top/../shared}
lockgen_src=$shared/bench/lockgen
[ -d "$lockgen_src" ] || { echo "bench/local.sh: $lockgen_src not found (set SHARED)" >&2; exit 2; }

DURATION=${DURATION:-5}
REPS=${REPS:-3}
WORKLOADS=${WORKLOADS:-"uncontended:1 distinct:16 distinct:64 contended:16"}
WAITS=${WAITS:-"read poll"}
REDIS_PORT=${REDIS_PORT:-16392}
OLD=${OLD:-}
SYSTEMS=${SYSTEMS:-"floor snaplock${OLD:+ snaplock-old} redis"}
mkdir -p bench/results
OUT=${OUT:-$top/bench/results/local-$(date -u +%Y%m%dT%H%M%SZ).jsonl}

cargo build --release --bin snaplockd --quiet
CARGO_TARGET_DIR=$top/target/lockgen cargo build --release --quiet --manifest-path "$lockgen_src/Cargo.toml"
CARGO_TARGET_DIR=$top/target/floor cargo build --release --quiet --locked --manifest-path bench/floor/Cargo.toml
LOCKGEN=$top/target/lockgen/release/lockgen
case " $SYSTEMS " in *" snaplock-old "*)
    [ -x "$OLD" ] || { echo "bench/local.sh: snaplock-old needs OLD=<snaplockd binary>" >&2; exit 2; } ;;
esac
case " $SYSTEMS " in *" redis "*)
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null || {
        echo "bench/local.sh: needs redis-server and redis-cli" >&2; exit 2; }
    if redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; then
        echo "bench/local.sh: something already answers on 127.0.0.1:$REDIS_PORT; set REDIS_PORT" >&2
        exit 2
    fi ;;
esac

pin_server=() pin_client=()
[ -z "${SERVER_CPUS:-}" ] || pin_server=(taskset -c "$SERVER_CPUS")
[ -z "${CLIENT_CPUS:-}" ] || pin_client=(taskset -c "$CLIENT_CPUS")

work=$(mktemp -d)
pids=()
stop_all() {
    local p
    for p in "${pids[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

wait_socket() { # path
    for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.05; done
    echo "bench/local.sh: nothing listens on $1" >&2; return 1
}
for sys in $SYSTEMS; do
    case $sys in
        floor) "${pin_server[@]}" "$top/target/floor/release/snaplock-floor" local "$work/floor.sock" &
               pids+=($!); wait_socket "$work/floor.sock" ;;
        snaplock) "${pin_server[@]}" "$top/target/release/snaplockd" --socket "$work/snaplock.sock" --log-level warn &
               pids+=($!); wait_socket "$work/snaplock.sock" ;;
        snaplock-old) "${pin_server[@]}" "$OLD" --socket "$work/snaplock-old.sock" --log-level warn &
               pids+=($!); wait_socket "$work/snaplock-old.sock" ;;
        redis) "${pin_server[@]}" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --protected-mode yes --save "" \
                   --appendonly no --daemonize no --dir "$work" --logfile "$work/redis.log" &
               pids+=($!)
               for _ in $(seq 100); do
                   redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
                   sleep 0.1
               done ;;
        *) echo "bench/local.sh: unknown system $sys" >&2; exit 2 ;;
    esac
done
echo "started ${pids[*]} ($SYSTEMS)" >&2

limit=$(python3 -c "import math; print(math.ceil($DURATION + 70))")
status=0
run() { # label workload clients args...
    local label=$1 wl=$2 c=$3; shift 3
    local rc=0
    timeout "$limit" "${pin_client[@]}" "$LOCKGEN" "$@" --duration "$DURATION" --workload "$wl" --clients "$c" \
        --label "$label" --key-prefix "$label-$wl-$c" >>"$OUT" || rc=$?
    if [ "$rc" -eq 3 ]; then
        echo "!! $label $wl c=$c: safety violation (see $OUT)" >&2; status=3
    elif [ "$rc" -ne 0 ]; then
        echo "!! $label $wl c=$c: lockgen exited $rc" >&2; [ "$status" -ne 0 ] || status=1
    fi
}
one() { # system workload clients
    local sys=$1 wl=$2 c=$3 w
    if [ "$sys" = redis ]; then
        run redis "$wl" "$c" --backend redis --redis "127.0.0.1:$REDIS_PORT"
        return
    fi
    for w in $WAITS; do
        run "$sys/$w" "$wl" "$c" --backend line --socket "$work/$sys.sock" --wait "$w"
    done
}

# warm up: a second of load on each
for sys in $SYSTEMS; do
    WAITS=read DURATION=1 one "$sys" distinct 4 >/dev/null 2>&1 || true
done
: >"$OUT.tmp"; mv "$OUT.tmp" "$OUT"

echo "results: $OUT" >&2
for spec in $WORKLOADS; do
    wl=${spec%%:*}; c=${spec##*:}
    for rep in $(seq "$REPS"); do
        for sys in $SYSTEMS; do one "$sys" "$wl" "$c"; done
    done
done

python3 "$top/bench/local_table.py" "$OUT" || echo "(no table printed: raw results in $OUT)" >&2
exit "$status"
