#!/usr/bin/env bash
# bench/cluster.sh: a cluster of snaplockd agents on loopback against a
# 3-member etcd, a 3-server ZooKeeper and an in-memory Redis, in one run.
#
#   bench/cluster.sh [bench]        load: 10 s x 3 rounds of every workload of every system
#   bench/cluster.sh failover       SIGKILL (or SIGSTOP: SIGNAL=stop) of a leader, time to the next grant
#   bench/cluster.sh all            bench, then failover, into one results file
#   bench/cluster.sh install        the Debian packages and the Python clients it needs
#   bench/cluster.sh report FILE    the tables of a results file again
#
#   DURATION=3 ROUNDS=1 bench/cluster.sh
#   SYSTEMS="etcd zookeeper" bench/cluster.sh          the peers alone
#   AGENTS=1 SYSTEMS=snaplock bench/cluster.sh         one agent, with --listen
#   AGENTS=3 INDEPENDENT=1 bench/cluster.sh failover   3 unclustered agents: tests the script only
#   SYSTEMS="floor-direct floor-owner snaplock redis" WORKLOADS="distinct:16 distinct:64" bench/cluster.sh
#                                  the message floor (bench/floor) against the agents and Redis
#
# Environment (defaults in brackets):
#   SYSTEMS ["snaplock redis etcd zookeeper"]   WORKLOADS ["uncontended:1 distinct:16 distinct:64 contended:16"]
#   AGENTS [3]  DURATION [10]  ROUNDS [3]  MAX_OPS [1000000]  PORT_BASE [14000]
#   WAIT [poll]: how lockgen's line clients (snaplock, floor) wait for a reply (lockgen --wait):
#       poll, as snaplock-client, libsnaplock and snaplock-cli do; read, blocked in read
#   SNAPLOCKD [built here]: the agent binary to run; when set, nothing of the workspace is
#       built (e.g. a release build of another work tree)
#   BUILD [pgo]: how snaplockd is built here: pgo, as the Debian package ships it
#       (packaging/pgo.sh, into target/pgo); plain, cargo build --release
#   AGENT_ARGS (extra snaplockd options)  INDEPENDENT [0]: agents without --listen/--neighbors
#   SCENARIOS ["free held-victim held-survivor"]  TRIALS [5]  VICTIM [owner]  BUDGET [60] (failover)
#   SIGNAL [kill] (failover): kill, SIGKILL of the victim; stop, SIGSTOP (silent, links left open),
#       SIGCONT when the trial ends
#   SHARED [../shared]  VENV [target/bench-venv]  OUT [bench/results/cluster-<UTC time>.jsonl]
#   QUIET_PCT [30]  QUIET_WAIT [120]: before each run, wait at most QUIET_WAIT s until the
#       machine is less than QUIET_PCT % busy over a second (others may be compiling)
#   KEEP_WORK [0]: keep the temporary directory (logs, data) and print its path
#
# floor-direct and floor-owner are not lock services: three processes of
# bench/floor that exchange only the messages of a grant agreed by two of
# three (floor-direct: every client at its name's owner; floor-owner:
# snaplock's messages, docs/cluster.md "Granting"), with no state, time or
# check. What they reach is what processes, sockets and wakeups alone allow
# on this machine (bench/RESULTS.md "The floor"). floor-strict is
# floor-owner plus the per-grant work every correct agent does (checked
# requests, keys, tables at home, owner and follower, timers, the whole
# LOCKED; bench/floor/src/strict.rs). floor-* runs only distinct names.
#
# Each round starts every system afresh, runs its workloads once and stops
# it, so the systems take turns and drift of the machine hits all of them
# alike; the report shows the median of the rounds. snaplock and Redis are
# driven by lockgen (native; for snaplock a copy with bench/lockgen-sockets.patch,
# which spreads the clients of one process over the agents' sockets, round
# robin), etcd and ZooKeeper by the peer harness lockbench.py (Python; its
# clients are spread over the members too). Everything listens on 127.0.0.1
# only, lives in a temporary directory and is stopped by its pid on any exit;
# every wait and every run is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
shared=${SHARED:-$top/../shared}
peers=$shared/bench/peers
lockgen_src=$shared/bench/lockgen
MODE=${1:-bench}

SYSTEMS=${SYSTEMS:-"snaplock redis etcd zookeeper"}
WORKLOADS=${WORKLOADS:-"uncontended:1 distinct:16 distinct:64 contended:16"}
AGENTS=${AGENTS:-3}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
MAX_OPS=${MAX_OPS:-1000000}
WAIT=${WAIT:-poll}
case "$WAIT" in read | poll) ;; *) echo "WAIT: read or poll, not $WAIT" >&2; exit 2 ;; esac
PORT_BASE=${PORT_BASE:-14000}
INDEPENDENT=${INDEPENDENT:-0}
SCENARIOS=${SCENARIOS:-"free held-victim held-survivor"}
TRIALS=${TRIALS:-5}
VICTIM=${VICTIM:-owner}
BUDGET=${BUDGET:-60}
SIGNAL=${SIGNAL:-kill}
QUIET=(--quiet-pct "${QUIET_PCT:-30}" --quiet-wait "${QUIET_WAIT:-120}")
VENV=${VENV:-$top/target/bench-venv}
PY=$VENV/bin/python
TOOL=(python3 "$top/bench/cluster_tool.py")
STAMP=$(date -u +%Y%m%dT%H%M%SZ)

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
die() { log "error: $*"; exit 1; }

install_all() {
    # policy-rc.d answering 101 keeps Debian from starting the packaged
    # services on their default ports; added only if absent.
    local added=0
    apt-get update -qq
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; added=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        etcd-server etcd-client zookeeperd default-jre-headless redis-server redis-tools
    [ "$added" = 0 ] || rm -f /usr/sbin/policy-rc.d
    make_venv
}

make_venv() {
    [ -x "$PY" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q -r "$peers/requirements.txt"
}

case "$MODE" in
install) install_all; exit 0 ;;
report) shift; exec "${TOOL[@]}" report "$@" ;;
bench | failover | all) ;;
*) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 2 ;;
esac

needs() { # needs SYSTEM: fails early when its programs are missing
    case "$1" in
    redis) command -v redis-server >/dev/null && command -v redis-cli >/dev/null ;;
    etcd) command -v etcd >/dev/null && command -v etcdctl >/dev/null && [ -f "$peers/lockbench.py" ] ;;
    zookeeper) command -v java >/dev/null && [ -f /usr/share/java/zookeeper.jar ] && [ -f "$peers/lockbench.py" ] ;;
    snaplock | floor-direct | floor-owner | floor-home | floor-strict) true ;;
    *) false ;;
    esac || die "$1: missing programs (bench/cluster.sh install, or see bench/RESULTS.md)"
}
[ "$MODE" = failover ] && SYSTEMS=snaplock
[ "$MODE" = bench ] || [ "$AGENTS" -ge 2 ] || die "failover needs AGENTS >= 2"
for s in $SYSTEMS; do needs "$s"; done
case " $SYSTEMS " in *" etcd "* | *" zookeeper "*) [ -x "$PY" ] || make_venv ;; esac

# ---------------------------------------------------------------- build ----
mkdir -p bench/results
OUT=${OUT:-$top/bench/results/cluster-$STAMP.jsonl}
case "$MODE: $SYSTEMS " in failover:* | all:* | *" snaplock "*)
    if [ -z "${SNAPLOCKD:-}" ]; then
        case ${BUILD:-pgo} in
        pgo) packaging/pgo.sh "$top/target/pgo" > /dev/null
            SNAPLOCKD=$top/target/pgo/snaplockd ;;
        plain) cargo build --release --quiet -p snaplock-agent
            SNAPLOCKD=$top/target/release/snaplockd ;;
        *) die "BUILD=$BUILD: pgo or plain" ;;
        esac
    fi
    [ -x "$SNAPLOCKD" ] || die "SNAPLOCKD=$SNAPLOCKD is not an executable" ;;
esac
case " $SYSTEMS " in *" floor-"*)
    CARGO_TARGET_DIR=$top/target/floor cargo build --release --quiet --locked --manifest-path bench/floor/Cargo.toml
    FLOOR=$top/target/floor/release/snaplock-floor ;;
esac
case " $SYSTEMS " in *" snaplock "* | *" redis "* | *" floor-"*)
    # lockgen with several sockets: a patched copy, the shared tree untouched
    lg=$top/target/lockgen-multi
    rm -rf "$lg/src-copy"; mkdir -p "$lg/src-copy"
    cp -r "$lockgen_src/Cargo.toml" "$lockgen_src/Cargo.lock" "$lockgen_src/src" "$lg/src-copy/"
    chmod -R u+w "$lg/src-copy"
    patch -s -d "$lg/src-copy" -p1 < bench/lockgen-sockets.patch || die "lockgen-sockets.patch does not apply"
    CARGO_TARGET_DIR=$lg/target cargo build --release --quiet --manifest-path "$lg/src-copy/Cargo.toml"
    LOCKGEN=$lg/target/release/lockgen ;;
esac

# ----------------------------------------------------- process control -----
work=$(mktemp -d /tmp/snaplock-cluster-bench.XXXXXX)
PIDS=()
stop_pids() { # stop_pids PID...: TERM, 5 s, then KILL; reaps them
    local p
    for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "$@"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
}
stop_all() { [ ${#PIDS[@]} -eq 0 ] || stop_pids "${PIDS[@]}"; PIDS=(); }
cleanup() {
    stop_all
    if [ "${KEEP_WORK:-0}" = 1 ]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_bg() { # start_bg LOGFILE CMD...: records the pid in PIDS and LAST_PID
    local logf=$1; shift
    { printf '%s start:' "$(date -u +%T)"; printf ' %q' "$@"; echo; } >> "$work/commands.txt"
    "$@" > "$logf" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}

wait_for() { # wait_for WHAT SECONDS CMD...: polls CMD every 0.2 s
    local what=$1 secs=$2 i; shift 2
    for i in $(seq $((secs * 5))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    log "$what did not come up in $secs s"; return 1
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
check_ports() { local p; for p in "$@"; do port_free "$p" || die "127.0.0.1:$p is in use; set PORT_BASE"; done; }

# ------------------------------------------------------------- systems -----
SNAP_SOCKS=() SNAP_PIDS=() SNAP_NAMES=() SNAP_ADDRS=()
start_snaplock() {
    local i dir=$work/snaplock neighbors="" args
    rm -rf "$dir"; mkdir -p "$dir"
    SNAP_SOCKS=() SNAP_PIDS=() SNAP_NAMES=() SNAP_ADDRS=()
    for i in $(seq "$AGENTS"); do
        SNAP_ADDRS+=("127.0.0.1:$((PORT_BASE + 100 + i))")
        neighbors+="${neighbors:+,}127.0.0.1:$((PORT_BASE + 100 + i))"
    done
    [ "$INDEPENDENT" = 1 ] || check_ports "${SNAP_ADDRS[@]##*:}"
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret"
    for i in $(seq "$AGENTS"); do
        args=(--socket "$dir/a$i.sock" --server-name "a$i" --log-level "${AGENT_LOG:-warn}")
        [ "$INDEPENDENT" = 1 ] || args+=(--listen "${SNAP_ADDRS[$((i - 1))]}" --neighbors "$neighbors"
                                         --secret-file "$dir/secret")
        # shellcheck disable=SC2086
        start_bg "$dir/a$i.log" "$SNAPLOCKD" "${args[@]}" ${AGENT_ARGS:-}
        SNAP_PIDS+=("$LAST_PID") SNAP_SOCKS+=("$dir/a$i.sock") SNAP_NAMES+=("a$i")
    done
    for i in $(seq "$AGENTS"); do
        wait_for "snaplockd a$i socket" 10 test -S "$dir/a$i.sock" || { agent_logs; return 1; }
    done
    "${TOOL[@]}" ready --timeout "${READY_TIMEOUT:-60}" "${SNAP_SOCKS[@]}" >&2 || { agent_logs; return 1; }
    for i in $(seq "$AGENTS"); do
        log "a$i: $("${TOOL[@]}" info "${SNAP_SOCKS[$((i - 1))]}")"
    done
}
agent_logs() {
    local i
    for i in $(seq "$AGENTS"); do
        kill -0 "${SNAP_PIDS[$((i - 1))]}" 2>/dev/null || log "snaplockd a$i exited"
        tail -n 5 "$work/snaplock/a$i.log" >&2 2>/dev/null || true
    done
}

FLOOR_SOCKS=
start_floor() { # start_floor direct|owner: 3 processes, ports PORT_BASE+501..
    local i ports="" dir=$work/floor
    rm -rf "$dir"; mkdir -p "$dir"
    FLOOR_SOCKS=""
    for i in 1 2 3; do
        check_ports $((PORT_BASE + 500 + i))
        ports+="${ports:+,}$((PORT_BASE + 500 + i))"
        FLOOR_SOCKS+="${FLOOR_SOCKS:+,}$dir/f$i.sock"
    done
    for i in 1 2 3; do
        start_bg "$dir/f$i.log" "$FLOOR" "$1" $((i - 1)) "$dir/f$i.sock" "$ports"
    done
    for i in 1 2 3; do wait_for "floor f$i socket" 10 test -S "$dir/f$i.sock" || return 1; done
}

REDIS_PORT=$((PORT_BASE + 400))
start_redis() {
    rm -rf "$work/redis"; mkdir -p "$work/redis"
    check_ports "$REDIS_PORT"
    start_bg "$work/redis/log" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --protected-mode yes \
        --save "" --appendonly no --daemonize no --dir "$work/redis"
    wait_for redis 30 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping
}

ETCD_EPS=
start_etcd() { # 3 members; clients PORT_BASE+201.., peers PORT_BASE+211..
    local i cluster="" dir=$work/etcd
    rm -rf "$dir"; mkdir -p "$dir"
    ETCD_EPS=""
    for i in 1 2 3; do
        cluster+="${cluster:+,}m$i=http://127.0.0.1:$((PORT_BASE + 210 + i))"
        ETCD_EPS+="${ETCD_EPS:+,}127.0.0.1:$((PORT_BASE + 200 + i))"
        check_ports $((PORT_BASE + 200 + i)) $((PORT_BASE + 210 + i))
    done
    for i in 1 2 3; do
        start_bg "$dir/m$i.log" etcd --name "m$i" --data-dir "$dir/m$i" \
            --listen-client-urls "http://127.0.0.1:$((PORT_BASE + 200 + i))" \
            --advertise-client-urls "http://127.0.0.1:$((PORT_BASE + 200 + i))" \
            --listen-peer-urls "http://127.0.0.1:$((PORT_BASE + 210 + i))" \
            --initial-advertise-peer-urls "http://127.0.0.1:$((PORT_BASE + 210 + i))" \
            --initial-cluster "$cluster" --initial-cluster-state new \
            --initial-cluster-token "cluster-bench-$STAMP" --logger zap --log-outputs stderr
    done
    wait_for etcd 60 env ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EPS" endpoint health
}

ZK_EPS=
zk_mode() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1; echo srvr >&3; cat <&3" 2>/dev/null | awk '/^Mode:/ {print $2}'; }
zk_serving() { [ -n "$(zk_mode "$1")" ]; }
start_zk() { # 3 servers; clients PORT_BASE+301.., quorum +311.., election +321..
    local i j dir=$work/zk
    rm -rf "$dir"; mkdir -p "$dir"
    ZK_EPS=""
    for i in 1 2 3; do
        check_ports $((PORT_BASE + 300 + i)) $((PORT_BASE + 310 + i)) $((PORT_BASE + 320 + i))
        mkdir -p "$dir/n$i/data"
        echo "$i" > "$dir/n$i/data/myid"
        {
            echo "tickTime=2000"; echo "initLimit=10"; echo "syncLimit=5"
            echo "dataDir=$dir/n$i/data"
            echo "clientPort=$((PORT_BASE + 300 + i))"; echo "clientPortAddress=127.0.0.1"
            echo "maxClientCnxns=0"; echo "admin.enableServer=false"
            echo "4lw.commands.whitelist=ruok,srvr,mntr"
            for j in 1 2 3; do echo "server.$j=127.0.0.1:$((PORT_BASE + 310 + j)):$((PORT_BASE + 320 + j))"; done
        } > "$dir/n$i/zoo.cfg"
        ZK_EPS+="${ZK_EPS:+,}127.0.0.1:$((PORT_BASE + 300 + i))"
    done
    for i in 1 2 3; do
        start_bg "$dir/n$i.log" java -Xms256m -Xmx512m -Dzookeeper.log.dir="$dir/n$i" \
            -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar \
            org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/n$i/zoo.cfg"
    done
    for i in 1 2 3; do wait_for "zookeeper n$i" 90 zk_serving $((PORT_BASE + 300 + i)) || return 1; done
    log "zookeeper modes: $(for i in 1 2 3; do printf '%s ' "$(zk_mode $((PORT_BASE + 300 + i)))"; done)"
}

# ----------------------------------------------------------------- load -----
status=0
limit=$(( ${DURATION%.*} + 120 ))
pids_csv() { local IFS=,; echo "${PIDS[*]:-}"; }

lockgen_run() { # lockgen_run SYSTEM ROUND WL CLIENTS TARGET-ARGS...
    local sys=$1 round=$2 wl=$3 c=$4 rc=0; shift 4
    log "$sys $wl c=$c (round $round; load $(cut -d' ' -f1-3 /proc/loadavg))"
    "${TOOL[@]}" measure --out "$OUT" --format lockgen --timeout "$limit" "${QUIET[@]}" --server-pids "$(pids_csv)" \
        --set "system=$sys" --set "round=$round" --set "agents=$AGENTS" -- \
        "$LOCKGEN" "$@" --workload "$wl" --clients "$c" --duration "$DURATION" --max-ops "$MAX_OPS" \
        --key-prefix "cb-$sys-$round" --label "$sys" || rc=$?
    if [ "$rc" = 3 ]; then log "!! $sys $wl c=$c: SAFETY VIOLATION"; status=3
    elif [ "$rc" != 0 ]; then log "!! $sys $wl c=$c: failed ($rc)"; [ "$status" != 0 ] || status=1; fi
}

lockbench_run() { # lockbench_run SYSTEM ROUND WL CLIENTS BACKEND ENDPOINTS
    local sys=$1 round=$2 wl=$3 c=$4 backend=$5 eps=$6 rc=0
    log "$sys $wl c=$c (round $round; load $(cut -d' ' -f1-3 /proc/loadavg))"
    "${TOOL[@]}" measure --out "$OUT" --format lockbench --timeout "$limit" "${QUIET[@]}" \
        --set "system=$sys" --set "round=$round" -- \
        "$PY" "$peers/lockbench.py" run --backend "$backend" --endpoints "$eps" --label "$sys" \
        --workload "$wl" --clients "$c" --duration "$DURATION" --max-ops 200000 --reps 1 \
        --server-pids "$(pids_csv)" >&2 || rc=$?
    [ "$rc" = 0 ] || { log "!! $sys $wl c=$c: failed ($rc)"; [ "$status" != 0 ] || status=1; }
}

warm() { # short unrecorded load, as the peer harness does
    "$@" >/dev/null 2>&1 || log "warm-up failed (continuing)"
}

run_system() { # run_system SYSTEM ROUND
    local sys=$1 round=$2 spec wl c label
    case "$sys" in
    snaplock)
        start_snaplock || { stop_all; return 1; }
        local socks; socks=$(IFS=,; echo "${SNAP_SOCKS[*]}")
        label="snaplock-$AGENTS"; [ "$INDEPENDENT" = 0 ] || label+="-independent"
        warm timeout 60 "$LOCKGEN" --backend line --socket "$socks" --workload distinct --clients 4 --duration 2
        for spec in $WORKLOADS; do
            lockgen_run "$label" "$round" "${spec%%:*}" "${spec##*:}" --backend line --socket "$socks" --wait "$WAIT"
        done ;;
    floor-direct | floor-owner | floor-home | floor-strict)
        start_floor "${sys#floor-}" || { stop_all; return 1; }
        warm timeout 60 "$LOCKGEN" --backend line --socket "$FLOOR_SOCKS" --workload distinct --clients 4 --duration 2
        for spec in $WORKLOADS; do
            # it excludes nothing: one name would only show overlaps
            [ "${spec%%:*}" != contended ] || continue
            lockgen_run "$sys-3" "$round" "${spec%%:*}" "${spec##*:}" --backend line --socket "$FLOOR_SOCKS" --wait "$WAIT"
        done ;;
    redis)
        start_redis || { stop_all; return 1; }
        warm timeout 60 "$LOCKGEN" --backend redis --redis "127.0.0.1:$REDIS_PORT" --workload distinct --clients 4 --duration 2
        for spec in $WORKLOADS; do
            lockgen_run redis-1-memory "$round" "${spec%%:*}" "${spec##*:}" --backend redis --redis "127.0.0.1:$REDIS_PORT"
        done ;;
    etcd | zookeeper)
        local backend eps
        if [ "$sys" = etcd ]; then start_etcd || { stop_all; return 1; }; backend=etcd eps=$ETCD_EPS label=etcd-3
        else start_zk || { stop_all; return 1; }; backend=zookeeper eps=$ZK_EPS label=zk-3; fi
        warm timeout 120 "$PY" "$peers/lockbench.py" run --backend "$backend" --endpoints "$eps" --label warmup \
            --workload distinct --clients 16 --duration 3 --max-ops 5000 --reps 1
        for spec in $WORKLOADS; do
            lockbench_run "$label" "$round" "${spec%%:*}" "${spec##*:}" "$backend" "$eps"
        done ;;
    esac
    stop_all
}

record_env() {
    {
        printf '{"tool":"env","time_utc":"%s","nproc":%s,' "$STAMP" "$(nproc)"
        printf '"kernel":"%s","snaplock":"%s","snaplockd":"%s",' "$(uname -r)" \
            "$(git -C "$(dirname "${SNAPLOCKD:-$top/x}")" rev-parse --short HEAD 2>/dev/null || echo '?')" "${SNAPLOCKD:-}"
        printf '"etcd":"%s",' "$(command -v etcd >/dev/null && etcd --version 2>/dev/null | head -1)"
        printf '"zookeeper":"%s",' "$(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || true)"
        printf '"redis":"%s",' "$(command -v redis-server >/dev/null && redis-server --version | cut -d' ' -f3)"
        printf '"systems":"%s","workloads":"%s","agents":%s,"duration_s":%s,"rounds":%s}\n' \
            "$SYSTEMS" "$WORKLOADS" "$AGENTS" "$DURATION" "$ROUNDS"
    } >> "$OUT"
}

# ----------------------------------------------------------------- main -----
log "results: $OUT (work dir $work)"
record_env
run_bench() {
    local round sys
    for round in $(seq "$ROUNDS"); do
        for sys in $SYSTEMS; do
            log "=== round $round: $sys"
            run_system "$sys" "$round" || { log "!! $sys could not be started"; status=1; }
        done
    done
}

run_failover() { # every trial on a fresh cluster, after waiting for a quiet machine
    local sc t i spec
    for sc in $SCENARIOS; do
        for t in $(seq "$TRIALS"); do
            log "=== failover $sc, trial $t"
            "${TOOL[@]}" quiet "${QUIET[@]}" >&2 || true
            start_snaplock || { stop_all; status=1; continue; }
            spec=""
            for i in $(seq "$AGENTS"); do
                spec+="${spec:+,}${SNAP_NAMES[$((i - 1))]}=${SNAP_SOCKS[$((i - 1))]}=${SNAP_PIDS[$((i - 1))]}=${SNAP_ADDRS[$((i - 1))]}"
            done
            timeout $(( ${BUDGET%.*} + 60 )) "${TOOL[@]}" failover --agents "$spec" --scenario "$sc" \
                --victim "$VICTIM" --budget "$BUDGET" --signal "$SIGNAL" --out "$OUT" --set "trial=$t" \
                --set "independent=$INDEPENDENT" || status=1
            stop_all
        done
    done
}

case "$MODE" in
bench) run_bench ;;
failover) run_failover ;;
all) run_bench; run_failover ;;
esac
"${TOOL[@]}" report "$OUT" || true
log "raw results: $OUT"
exit "$status"
