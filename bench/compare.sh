#!/usr/bin/env bash
# bench/compare.sh: snaplockd against an in-memory Redis, measured by the
# shared load generator `lockgen` in one run (../shared/bench/lockgen).
#
#   bench/compare.sh                 all four workloads, 10 s x 3 reps each
#   DURATION=3 REPS=1 bench/compare.sh
#   AGENT_ARGS="-c my.conf" bench/compare.sh      extra snaplockd options
#   WAIT=read bench/compare.sh       how lockgen's snaplock clients wait for a
#                                    reply (lockgen --wait): poll [default], as
#                                    snaplock's client libraries do, or read
#
# It builds snaplockd (as the Debian package does, below) and lockgen
# (into target/lockgen), starts
# snaplockd on a socket in a temporary directory, runs compare.sh (which
# starts and stops its own redis-server), writes the JSON lines to
# bench/results/, and stops snaplockd by its pid on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
shared=${SHARED:-$top/../shared}
lockgen_src=$shared/bench/lockgen
[ -d "$lockgen_src" ] || { echo "bench/compare.sh: $lockgen_src not found (set SHARED)" >&2; exit 2; }

# SNAPLOCKD: the agent to run; else built here as BUILD says: pgo (the
# default), as the Debian package ships it (packaging/pgo.sh, into
# target/pgo); plain, cargo build --release.
if [ -z "${SNAPLOCKD:-}" ]; then
    case ${BUILD:-pgo} in
    pgo) packaging/pgo.sh "$top/target/pgo" > /dev/null
        SNAPLOCKD=$top/target/pgo/snaplockd ;;
    plain) cargo build --release --bin snaplockd --quiet
        SNAPLOCKD=$top/target/release/snaplockd ;;
    *) echo "bench/compare.sh: BUILD=$BUILD: pgo or plain" >&2; exit 2 ;;
    esac
fi
CARGO_TARGET_DIR=$top/target/lockgen cargo build --release --quiet --manifest-path "$lockgen_src/Cargo.toml"
export LOCKGEN=$top/target/lockgen/release/lockgen

work=$(mktemp -d)
agent_pid=
cleanup() {
    if [ -n "$agent_pid" ] && kill -0 "$agent_pid" 2>/dev/null; then
        kill -TERM "$agent_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$agent_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$agent_pid" 2>/dev/null || true
        wait "$agent_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$SNAPLOCKD" --socket "$work/snaplock.sock" --log-level warn ${AGENT_ARGS:-} &
agent_pid=$!
for _ in $(seq 100); do [ -S "$work/snaplock.sock" ] && break; sleep 0.05; done
[ -S "$work/snaplock.sock" ] || { echo "bench/compare.sh: snaplockd did not start" >&2; exit 1; }

WAIT=${WAIT:-poll}
case "$WAIT" in read | poll) ;; *) echo "WAIT: read or poll, not $WAIT" >&2; exit 2 ;; esac
export LINE_ARGS="--wait $WAIT ${LINE_ARGS:-}"

mkdir -p bench/results
export OUT=${OUT:-$top/bench/results/compare-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
"$lockgen_src/compare.sh" "$work/snaplock.sock"
echo "raw results: $OUT" >&2
