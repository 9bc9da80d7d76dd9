#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 20) and exits non-zero
# on the first crash, leaving the crashing input in fuzz/artifacts/<target>/.
#
#   fuzz/run.sh [SECONDS]
#
# cargo fuzz needs nightly-only compiler flags (sanitizers, coverage
# instrumentation); RUSTC_BOOTSTRAP=1 lets the stable toolchain accept
# them. Installs the pinned cargo-fuzz when it is missing.
# Reproduce a crash: RUSTC_BOOTSTRAP=1 cargo fuzz run -a TARGET artifacts/TARGET/crash-...
set -euo pipefail
cd "$(dirname "$0")"

seconds="${1:-20}"
cargo_fuzz_version="0.13.2"
# address (the default), or none where the sanitizer runtime is missing.
sanitizer="${FUZZ_SANITIZER:-address}"

if ! cargo fuzz --version 2>/dev/null | grep -qF "$cargo_fuzz_version"; then
    echo "installing cargo-fuzz $cargo_fuzz_version"
    # A tool, not project code: built without the caller's RUSTFLAGS.
    env -u RUSTFLAGS cargo install cargo-fuzz --locked --version "$cargo_fuzz_version"
fi

export RUSTC_BOOTSTRAP=1
targets=(parse framer core peer)
cargo fuzz build -a -s "$sanitizer"

for target in "${targets[@]}"; do
    mkdir -p "corpus/$target"
    corpora=("corpus/$target")
    [ -d "seeds/$target" ] && corpora+=("seeds/$target")
    options=(-max_total_time="$seconds" -print_final_stats=1)
    [ -f "$target.dict" ] && options+=(-dict="$target.dict")
    echo "== fuzz $target for ${seconds}s"
    log="$(mktemp)"
    if ! cargo fuzz run -a -s "$sanitizer" "$target" "${corpora[@]}" -- "${options[@]}" >"$log" 2>&1; then
        tail -n 60 "$log"
        rm -f "$log"
        echo "fuzz target $target failed: see fuzz/artifacts/$target/" >&2
        exit 1
    fi
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|DONE' "$log" || true
    rm -f "$log"
done
echo "fuzz: no crash in ${#targets[@]} targets"
