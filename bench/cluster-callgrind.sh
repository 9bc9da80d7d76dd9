#!/usr/bin/env bash
# bench/cluster-callgrind.sh: the user-space instructions three agents
# spend per grant, counted by callgrind (exact counts, unlike a clock: two
# builds can be told apart by a few percent on a busy machine).
#
#   bench/cluster-callgrind.sh [SNAPLOCKD]     default: target/release/snaplockd, built here
#   CLIENTS=64 DURATION=20 bench/cluster-callgrind.sh /path/to/other/snaplockd
#
# Runs bench/cluster.sh (distinct names, CLIENTS [16] clients, DURATION [20]
# s, one round) with each agent under `valgrind --tool=callgrind`, then
# reads the three profiles: every instruction of the agents (start-up,
# elections and pings included) over the grants they delivered
# (`Core::deliver_grant`, warm-up included), the allocations per grant, and the
# calls per grant and instructions per call of the wire's functions.
# Under valgrind the agents are some 50 times slower, so few requests are in
# flight at once. Which agent owns which name changes with each run (the
# names and the leaders' order are drawn anew), and with it how many peer
# messages a grant takes: compare builds by the instructions per call of a
# function, or by several runs each. Needs valgrind (apt install valgrind).
# Profiles are kept in OUT_DIR [a temporary directory, printed].
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is missing (apt install valgrind)" >&2; exit 1; }
bin=${1:-}
if [ -z "$bin" ]; then
    cargo build --release --quiet -p snaplock-agent
    bin=$PWD/target/release/snaplockd
fi
[ -x "$bin" ] || { echo "$bin: not an executable" >&2; exit 1; }
out=${OUT_DIR:-$(mktemp -d /tmp/snaplock-callgrind.XXXXXX)}
mkdir -p "$out"
wrap=$out/snaplockd-under-callgrind
cat > "$wrap" <<WRAP
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file=$out/callgrind.out.%p "$bin" "\$@"
WRAP
chmod +x "$wrap"
SNAPLOCKD=$wrap SYSTEMS=snaplock WORKLOADS="distinct:${CLIENTS:-16}" DURATION=${DURATION:-20} ROUNDS=1 \
    READY_TIMEOUT=120 QUIET_WAIT=${QUIET_WAIT:-30} OUT=$out/run.jsonl bench/cluster.sh > "$out/cluster.log" 2>&1 \
    || { tail -5 "$out/cluster.log" >&2; exit 1; }
grep -E '^line' "$out/cluster.log" >&2 || true
python3 - "$out" <<'PY'
import collections, glob, re, sys

total, calls, incl, names_all = 0, collections.Counter(), collections.Counter(), set()
for path in glob.glob(sys.argv[1] + "/callgrind.out.*"):
    names, callee = {}, None
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("summary:"):
            total += int(line.split()[1])
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line)
        if m:
            kind, idx, name = m.groups()
            if name:
                names[idx] = name.strip()
            if kind == "cfn":
                callee = names.get(idx, idx)
        else:
            m = re.match(r"^calls=(\d+)", line)
            if m and callee:
                calls[callee] += int(m.group(1))
                incl[callee] += int(lines[i + 1].split()[1])
                i += 1
        i += 1
grants = calls["snaplock_proto::core::Core::deliver_grant"]
if not grants:
    sys.exit("no grant in the profiles")
# Rust's allocations, whichever allocator serves them (malloc for older builds)
allocs = calls["__rustc::__rust_alloc"] or calls["malloc"]
print("grants %d, instructions per grant %d, allocations per grant %.1f"
      % (grants, total / grants, allocs / grants))
print("%-60s %14s %12s" % ("function", "calls/grant", "instr/call"))
for short in ("wire::parse::parse", "wire::scan::scan", "cluster::msg::PeerMsg::parse",
              "cluster::msg::PeerMsg::read_common", "cluster::persist::too_far",
              "cluster::msg::PeerMsg::into_line", "wire::line::Line::finish",
              "wire::encode::encode", "wire::encode::encode_value",
              "leader::<impl snaplock_proto::core::Core>::owner_lock",
              "client::<impl snaplock_proto::core::Core>::client_message"):
    for name in calls:
        if name.endswith(short) and calls[name]:
            print("%-60s %14.2f %12.0f" % (short, calls[name] / grants, incl[name] / calls[name]))
PY
echo "profiles: $out" >&2
