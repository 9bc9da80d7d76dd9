#!/bin/bash
# Builds snaplockd optimized with a profile of its own hot paths
# (profile-guided optimization):
#
#     packaging/pgo.sh OUT_DIR        -> OUT_DIR/snaplockd
#
# 1. snaplockd is built instrumented (rustc -Cprofile-generate);
# 2. it runs the training workload: one agent alone, then three agents
#    in a cluster on loopback, each with lock+unlock by 1, 16 and 64
#    clients on names of their own and by 16 clients on one name
#    (snaplock-load, the requests as the benchmark's clients write them);
# 3. the agents stop (SIGTERM: each writes its counts as it exits) and
#    llvm-profdata merges the counts;
# 4. snaplockd is built again with them (rustc -Cprofile-use).
#
# Both builds link the program whole (fat LTO, one codegen unit).
#
# The profile only decides how the code is laid out and inlined: the
# program is the same, and so are its tests. The Debian package ships
# this build (DEB_BUILD_OPTIONS=nopgo ships the plain one).
#
# llvm-profdata must read what rustc's LLVM writes: the one of rustup's
# llvm-tools component when it is installed, else Debian's newest
# llvm-profdata-NN (Debian 12: llvm-19, which reads the counts of rustc
# 1.95's LLVM 22), else llvm-profdata. LLVM_PROFDATA names another.
#
# Environment: CARGO_TARGET_DIR (where the plain build is; default
# ./target), PGO_PORT_BASE (three loopback ports from it + 1; default
# one of 25000-28999 by the script's pid), PGO_SECS (seconds per
# workload; default 2).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: packaging/pgo.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
target=${CARGO_TARGET_DIR:-$top/target}
# Two builds at once on one machine take different ports.
port_base=${PGO_PORT_BASE:-$((25000 + ($$ % 1000) * 4))}
secs=${PGO_SECS:-2}

say() { printf '== pgo: %s\n' "$*" >&2; }
die() { printf 'packaging/pgo.sh: %s\n' "$*" >&2; exit 1; }

profdata=${LLVM_PROFDATA:-}
if [ -z "$profdata" ]; then
    sysroot=$(rustc --print sysroot)
    for p in "$sysroot"/lib/rustlib/*/bin/llvm-profdata; do
        [ -x "$p" ] && profdata=$p
    done
fi
if [ -z "$profdata" ]; then
    profdata=$(compgen -c llvm-profdata- | sort -t- -k3 -n | tail -1 || true)
fi
[ -n "$profdata" ] || profdata=$(command -v llvm-profdata || true)
[ -n "$profdata" ] || die "no llvm-profdata (Debian: apt-get install llvm-19; rustup: rustup component add llvm-tools)"
say "llvm-profdata: $profdata"

cd "$top"
# Flags of their own: the plain build's are left as they are, and each of
# the two builds keeps its own target directory. Both link the whole
# program as one unit (fat LTO, one codegen unit): with the profile, it
# inlines across crates where the hot paths cross them.
flags=${RUSTFLAGS:-}
say "building the load (plain) and the instrumented agent"
cargo build --release --locked --quiet -p snaplock-tests --bin snaplock-load
load=$target/release/snaplock-load
export CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1
rm -rf "$out/counts"
mkdir -p "$out/counts"
RUSTFLAGS="$flags -Cprofile-generate=$out/counts" CARGO_TARGET_DIR="$out/instrumented" \
    cargo build --release --locked --quiet -p snaplock-agent --bin snaplockd
agent=$out/instrumented/release/snaplockd

work=$(mktemp -d "${TMPDIR:-/tmp}/snaplock-pgo.XXXXXX")
pids=()
stop() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Runs the workloads against the sockets given.
train() {
    local sockets=$1 clients
    "$load" --socket "$sockets" --clients 1 --secs 1 --wait-ready 60 >&2
    for clients in 16 64; do
        "$load" --socket "$sockets" --clients "$clients" --secs "$secs" >&2
    done
    "$load" --socket "$sockets" --clients 16 --secs "$secs" --one-name >&2
}

export LLVM_PROFILE_FILE="$out/counts/snaplockd-%p-%m.profraw"
say "training: one agent"
mkdir -p "$work/one"
"$agent" --socket "$work/one/a.sock" -n one --state-dir "$work/one" --log-level warn \
    2> "$work/one/a.log" &
pids+=($!)
train "$work/one/a.sock" || { cat "$work/one/a.log" >&2; die "the training of one agent failed"; }
stop

say "training: three agents"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/secret"
chmod 600 "$work/secret"
nb=""
for i in 1 2 3; do nb+="${nb:+,}127.0.0.1:$((port_base + i))"; done
for i in 1 2 3; do
    mkdir -p "$work/a$i"
    "$agent" --socket "$work/a$i/a.sock" -n "a$i" --listen "127.0.0.1:$((port_base + i))" \
        --neighbors "$nb" --secret-file "$work/secret" --state-dir "$work/a$i" --log-level warn \
        2> "$work/a$i/a.log" &
    pids+=($!)
done
train "$work/a1/a.sock,$work/a2/a.sock,$work/a3/a.sock" \
    || { cat "$work"/a?/a.log >&2; die "the training of three agents failed"; }
stop
unset LLVM_PROFILE_FILE

# (The build scripts the instrumented build ran left counts of their own
# there too: only the agents' are merged.)
n=$(find "$out/counts" -name 'snaplockd-*.profraw' | wc -l)
[ "$n" -ge 4 ] || die "expected the counts of 4 agents, found $n"
"$profdata" merge -o "$out/snaplockd.profdata" "$out/counts"/snaplockd-*.profraw \
    || die "$profdata cannot read these counts (its LLVM is older than rustc's?); set LLVM_PROFDATA"

say "building the agent with the profile"
RUSTFLAGS="$flags -Cprofile-use=$out/snaplockd.profdata" CARGO_TARGET_DIR="$out/optimized" \
    cargo build --release --locked --quiet -p snaplock-agent --bin snaplockd
cp "$out/optimized/release/snaplockd" "$out/snaplockd"
say "done: $out/snaplockd"
