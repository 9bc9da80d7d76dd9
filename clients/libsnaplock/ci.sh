#!/bin/sh
# Checks libsnaplock the way C programs use it:
#   1. the committed include/snaplock.h is what cbindgen generates (when the
#      pinned cbindgen is installed; INSTALL_CBINDGEN=1 installs it first);
#   2. the release build gives libsnaplock.so (soname libsnaplock.so.1),
#      libsnaplock.a, and exports every function the header declares;
#   3. examples/example.c and examples/transaction.c compile with -std=c99
#      -Wall -Wextra -Werror against the committed header, once linked
#      with the shared library and once with the static one, through a
#      staged install tree and its snaplock.pc;
#   4. all four programs run against a real snaplockd on a temporary socket.
# Exits non-zero, saying what failed, on any failure.

set -eu

CBINDGEN_VERSION=0.29.0

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
release=$target/release
tmp=$(mktemp -d "${TMPDIR:-/tmp}/libsnaplock-ci.XXXXXX")
agent_pid=

step() { printf 'libsnaplock ci: %s\n' "$*"; }
fail() {
    printf 'libsnaplock ci: FAILED: %s\n' "$*" >&2
    exit 1
}

stop_agent() {
    [ -n "$agent_pid" ] || return 0
    kill -TERM "$agent_pid" 2>/dev/null || true
    i=0
    while kill -0 "$agent_pid" 2>/dev/null && [ $i -lt 50 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    kill -KILL "$agent_pid" 2>/dev/null || true
    wait "$agent_pid" 2>/dev/null || true
    agent_pid=
}

cleanup() {
    stop_agent
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
[ -n "$version" ] || fail "cannot read the workspace version from Cargo.toml"

# 1. The header.
have_cbindgen() {
    command -v cbindgen >/dev/null 2>&1 \
        && [ "$(cbindgen --version 2>/dev/null)" = "cbindgen $CBINDGEN_VERSION" ]
}
if ! have_cbindgen && [ "${INSTALL_CBINDGEN:-0}" = 1 ]; then
    step "installing cbindgen $CBINDGEN_VERSION"
    # A tool, not project code: built without the caller's RUSTFLAGS.
    timeout 900 env -u RUSTFLAGS cargo install cbindgen --locked --version "$CBINDGEN_VERSION" \
        || fail "cargo install cbindgen $CBINDGEN_VERSION"
    PATH=${CARGO_HOME:-$HOME/.cargo}/bin:$PATH
fi
if have_cbindgen; then
    step "regenerating snaplock.h with cbindgen $CBINDGEN_VERSION"
    (cd "$here" && timeout 300 cbindgen --quiet --config cbindgen.toml \
        --crate libsnaplock --output "$tmp/snaplock.h" .) \
        || fail "cbindgen could not generate the header"
    diff -u "$here/include/snaplock.h" "$tmp/snaplock.h" \
        || fail "include/snaplock.h is stale: regenerate it with
    (cd clients/libsnaplock && cbindgen --config cbindgen.toml --crate libsnaplock --output include/snaplock.h .)"
else
    step "SKIPPED the header check: cbindgen $CBINDGEN_VERSION is not installed (INSTALL_CBINDGEN=1 installs it)"
fi

# 2. The libraries and the agent.
step "cargo build --release"
(cd "$root" && timeout 1200 cargo build --release --quiet -p libsnaplock -p snaplock-agent) \
    || fail "cargo build --release -p libsnaplock -p snaplock-agent"
for f in libsnaplock.so libsnaplock.a snaplockd; do
    [ -f "$release/$f" ] || fail "$release/$f was not built"
done
if command -v readelf >/dev/null 2>&1; then
    soname=$(readelf -d "$release/libsnaplock.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ "$soname" = libsnaplock.so.1 ] || fail "the soname is '$soname', not libsnaplock.so.1"
fi
if command -v nm >/dev/null 2>&1; then
    declared=$(sed -n -e '/^ *\/\//d' -e 's/^.*[ *]\(snaplock_[a-z_]*\)(.*$/\1/p' \
        "$here/include/snaplock.h" | sort -u)
    exported=$(nm -D --defined-only "$release/libsnaplock.so" | awk '{print $3}' | sort -u)
    [ -n "$declared" ] || fail "no function found in include/snaplock.h"
    for fn in $declared; do
        printf '%s\n' "$exported" | grep -qx "$fn" \
            || fail "libsnaplock.so does not export $fn, which snaplock.h declares"
    done
fi

# 3. A staged install tree, as the packages lay it out, and the example.
prefix=$tmp/prefix
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include" "$tmp/static/pkgconfig"
cp "$release/libsnaplock.so" "$prefix/lib/libsnaplock.so.1"
ln -s libsnaplock.so.1 "$prefix/lib/libsnaplock.so"
cp "$here/include/snaplock.h" "$prefix/include/"
cp "$release/libsnaplock.a" "$tmp/static/"
pc() { # libdir output
    sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$1|" \
        -e "s|@INCLUDEDIR@|$prefix/include|" -e "s|@VERSION@|$version|" \
        "$here/snaplock.pc.in" >"$2"
}
pc "$prefix/lib" "$prefix/lib/pkgconfig/snaplock.pc"
pc "$tmp/static" "$tmp/static/pkgconfig/snaplock.pc"
grep -q @ "$prefix/lib/pkgconfig/snaplock.pc" && fail "snaplock.pc.in has an unknown @placeholder@"
got=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion snaplock) \
    || fail "pkg-config does not read snaplock.pc"
[ "$got" = "$version" ] || fail "snaplock.pc says version $got, not $version"

CFLAGS="-std=c99 -Wall -Wextra -Werror -I $here/include"
for example in example transaction; do
    step "cc $CFLAGS $example.c (shared)"
    # shellcheck disable=SC2046,SC2086 # word splitting is wanted
    cc $CFLAGS "$here/examples/$example.c" -o "$tmp/$example-shared" \
        $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --libs snaplock) \
        || fail "compiling examples/$example.c against libsnaplock.so"
    step "cc $CFLAGS $example.c (static)"
    # shellcheck disable=SC2046,SC2086
    cc $CFLAGS "$here/examples/$example.c" -o "$tmp/$example-static" \
        $(PKG_CONFIG_PATH=$tmp/static/pkgconfig pkg-config --static --libs snaplock) \
        || fail "compiling examples/$example.c against libsnaplock.a"
    if command -v readelf >/dev/null 2>&1; then
        readelf -d "$tmp/$example-shared" | grep -q 'NEEDED.*\[libsnaplock\.so\.1\]' \
            || fail "the shared $example does not need libsnaplock.so.1"
        readelf -d "$tmp/$example-static" | grep -q 'NEEDED.*libsnaplock' \
            && fail "the static $example still needs a libsnaplock shared library"
    fi
done

# 4. Against a real agent.
"$release/snaplockd" --socket "$tmp/s.sock" --log-level warn </dev/null &
agent_pid=$!
i=0
while [ ! -S "$tmp/s.sock" ]; do
    kill -0 "$agent_pid" 2>/dev/null || fail "snaplockd exited at start"
    [ $i -lt 100 ] || fail "snaplockd did not listen within 10 s"
    sleep 0.1
    i=$((i + 1))
done
# example: the lease ends; transaction: snaplock(7)'s medical example.
for run in example:'^lease ended$' transaction:'^review committed$'; do
    example=${run%%:*}
    want=${run#*:}
    for kind in shared static; do
        step "running the $kind $example against snaplockd"
        rc=0
        LD_LIBRARY_PATH=$prefix/lib timeout 30 "$tmp/$example-$kind" "$tmp/s.sock" \
            >"$tmp/out-$example-$kind" 2>&1 || rc=$?
        if [ $rc -ne 0 ]; then
            cat "$tmp/out-$example-$kind" >&2
            fail "the $kind $example exited with status $rc (124: it ran over 30 s)"
        fi
        grep -q "$want" "$tmp/out-$example-$kind" || {
            cat "$tmp/out-$example-$kind" >&2
            fail "the $kind $example did not print $want"
        }
    done
done
stop_agent
step "all passed"
