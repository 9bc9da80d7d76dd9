#!/usr/bin/env bash
# CI for the Debian packages: build them (packaging/build-deb.sh), lint
# them, install them on this machine, use what they installed (snaplockd on
# a temporary socket, snaplock-cli, a C program built with pkg-config),
# then purge them and check that nothing is left.
#
#     packaging/ci.sh [OUTPUT_DIR]      (as root; default: target/debian)
#
# It refuses to run where snaplock is installed, or the user or group
# snaplock exists, since its purge would remove them.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=${1:-$repo/target/debian}

packages=(snaplock libsnaplock1 libsnaplock-dev)
started=$SECONDS

say() { printf '\n== %s\n' "$*"; }
die() { printf 'packaging/ci.sh: FAILED: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run it as root: it installs and purges packages"
for p in "${packages[@]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv 'not-installed'; then
        die "$p is installed on this machine; this check would purge it"
    fi
done
if getent passwd snaplock >/dev/null; then die "the user snaplock exists; this check would remove it"; fi
if getent group snaplock >/dev/null; then die "the group snaplock exists; this check would remove it"; fi

tmp=$(mktemp -d /tmp/snaplock-deb-ci.XXXXXX)
agent=
installed=

cleanup() {
    local status=$?
    if [ -n "$agent" ] && kill -0 "$agent" 2>/dev/null; then
        kill -KILL "$agent" 2>/dev/null || true
        wait "$agent" 2>/dev/null || true
    fi
    if [ -n "$installed" ]; then
        echo "cleanup: purging ${packages[*]}" >&2
        dpkg --purge "${packages[@]}" >/dev/null 2>&1 || true
    fi
    rm -rf "$tmp"
    if [ "$status" -ne 0 ]; then echo "packaging/ci.sh: FAILED (status $status)" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "tools"
need=()
command -v lintian >/dev/null || need+=(lintian)
command -v pkg-config >/dev/null || need+=(pkg-config)
# The package snaplock depends on it (its postinst creates the system user).
command -v adduser >/dev/null || need+=(adduser)
command -v cc >/dev/null || need+=(gcc libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
    timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 600 \
        apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

say "build (packaging/build-deb.sh)"
timeout 1800 packaging/build-deb.sh "$out"
version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
arch=$(dpkg --print-architecture)
debs=()
for p in "${packages[@]}"; do
    debs+=("$out/${p}_${version}_${arch}.deb")
done
dbgsym=("$out/dbgsym/snaplock-dbgsym_${version}_${arch}.deb"
    "$out/dbgsym/libsnaplock1-dbgsym_${version}_${arch}.deb")
for f in "${debs[@]}" "${dbgsym[@]}"; do [ -f "$f" ] || die "$f was not built"; done
for f in "${debs[@]}"; do
    echo "--- $(basename "$f")"
    dpkg-deb --contents "$f" | awk '{ print "   ", $1, $2, $6, $7, $8 }'
done

say "lintian (errors fail, warnings are shown)"
lintian --version
timeout 900 lintian --fail-on error --display-info --tag-display-limit 0 "${debs[@]}" "${dbgsym[@]}" \
    | tee "$tmp/lintian.txt" || die "lintian found errors"
echo "lintian: $(grep -c '^E:' "$tmp/lintian.txt" || true) errors," \
    "$(grep -c '^W:' "$tmp/lintian.txt" || true) warnings," \
    "$(grep -c '^I:' "$tmp/lintian.txt" || true) notes"
# The .changes lists only files beside it (the -dbgsym packages are in
# dbgsym/), so that lintian, dput and dcmd can read it.
changes="$out/snaplock_${version}_${arch}.changes"
[ -f "$changes" ] || die "$changes was not built"
timeout 900 lintian --fail-on error "$changes" >"$tmp/lintian-changes.txt" 2>&1 \
    || { cat "$tmp/lintian-changes.txt"; die "lintian $(basename "$changes") failed"; }

say "install (dpkg -i)"
installed=yes
DEBIAN_FRONTEND=noninteractive timeout 300 dpkg -i "${debs[@]}"
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" | grep -qx 'install ok installed' || die "$p is not installed"
    dpkg-query -L "$p" >"$tmp/$p.files"
done
getent passwd snaplock || die "no user snaplock"
getent group snaplock || die "no group snaplock"
[ "$(getent passwd snaplock | cut -d: -f6)" = /nonexistent ] || die "snaplock has a home directory"
[ -f /etc/snaplock/snaplock.conf ] || die "no /etc/snaplock/snaplock.conf"
dpkg-query -W -f='${Conffiles}\n' snaplock | grep -q ' /etc/snaplock/snaplock.conf ' \
    || die "/etc/snaplock/snaplock.conf is not a conffile"
unit=$(grep -E '^(/usr)?/lib/systemd/system/snaplock\.service$' "$tmp/snaplock.files") \
    || die "no snaplock.service in the package"
grep -qx 'Type=notify' "$unit" || die "$unit is not Type=notify"
grep -qx 'StateDirectory=snaplock' "$unit" || die "$unit keeps no state directory"
ls -l /etc/systemd/system/multi-user.target.wants/snaplock.service \
    || die "the unit was not enabled"
/usr/sbin/snaplockd --version
# The installed configuration, every key at its default, is usable (the
# host name may make no valid server name, hence -n).
/usr/sbin/snaplockd --check-config -n ci || die "the installed configuration is refused"
# The cluster guide and its example configuration are installed as
# documentation (the example uncompressed, to be copied), and the example
# is a usable configuration once its secret_file exists.
cluster_example=/usr/share/doc/snaplock/examples/snaplock-cluster.conf
[ -f "$cluster_example" ] || die "no $cluster_example"
[ -f /usr/share/doc/snaplock/cluster-setup.md.gz ] || die "no /usr/share/doc/snaplock/cluster-setup.md.gz"
head -c 32 /dev/urandom | base64 >"$tmp/secret"
chmod 0600 "$tmp/secret"
sed "s|^secret_file=.*|secret_file=$tmp/secret|" "$cluster_example" >"$tmp/cluster.conf"
/usr/sbin/snaplockd --check-config -c "$tmp/cluster.conf" || die "$cluster_example is refused"
if command -v systemd-analyze >/dev/null; then
    timeout 60 systemd-analyze verify "$unit" || die "systemd-analyze refuses $unit"
fi

say "the installed snaplockd, as the user snaplock, on $tmp/s.sock"
sock=$tmp/s.sock
chgrp snaplock "$tmp"
chmod 0770 "$tmp"
setpriv --reuid=snaplock --regid=snaplock --init-groups -- \
    /usr/sbin/snaplockd --socket "$sock" --state-dir "$tmp/state" --server-name ci \
    --log-level debug 2>"$tmp/agent.log" &
agent=$!
cli=/usr/bin/snaplock-cli
for _ in $(seq 100); do
    if "$cli" --socket "$sock" status >/dev/null 2>&1; then break; fi
    kill -0 "$agent" 2>/dev/null || { cat "$tmp/agent.log" >&2; die "snaplockd exited"; }
    sleep 0.1
done
[ "$("$cli" --socket "$sock" status)" = ready ] || die "the agent is not ready"
[ "$(stat -c '%a %G' "$sock")" = "660 snaplock" ] || die "the socket is not 0660 group snaplock"

say "the installed snaplock-cli"
# shellcheck disable=SC2016 # the command's shell expands them
timeout 30 "$cli" --socket "$sock" lock -w 5 -d 10 ci-object -- \
    sh -c 'echo "holding $SNAPLOCK_OBJECT, fence $SNAPLOCK_FENCE"; test -n "$SNAPLOCK_FENCE"' \
    || die "snaplock-cli lock failed"
timeout 30 "$cli" --socket "$sock" info | tee "$tmp/info.txt"
grep -q '^server_name: ci$' "$tmp/info.txt" || die "info does not name the server ci"
# A held lock makes a try fail with the documented code 1.
timeout 30 "$cli" --socket "$sock" lock ci-held -- sleep 3 &
holder=$!
sleep 1
set +e
timeout 30 "$cli" --socket "$sock" lock -n ci-held -- true
code=$?
set -e
wait "$holder" || die "the holder's command failed"
[ "$code" -eq 1 ] || die "a try on a held lock exited with $code, not 1"

say "a C program built with pkg-config --cflags --libs snaplock"
example=clients/libsnaplock/examples/example.c
[ -f "$example" ] || die "$example is missing"
pkg-config --modversion snaplock
# shellcheck disable=SC2046 # pkg-config prints separate words
cc -std=c99 -Wall -Wextra -Werror -o "$tmp/example" "$example" $(pkg-config --cflags --libs snaplock)
multiarch=$(dpkg-architecture -q DEB_HOST_MULTIARCH)
used=$(ldd "$tmp/example" | sed -n 's/^\tlibsnaplock\.so\.1 => \(.*\) (0x.*$/\1/p')
if [ -z "$used" ] || [ "$(realpath "$used")" != "/usr/lib/$multiarch/libsnaplock.so.1" ]; then
    die "example does not use the installed library: $(ldd "$tmp/example")"
fi
SNAPLOCK_SOCKET=$sock timeout 60 "$tmp/example" || die "the C example failed"
# The same with the static library of libsnaplock-dev and its Libs.private.
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror -o "$tmp/example-static" "$example" $(pkg-config --cflags snaplock) \
    $(pkg-config --static --libs snaplock | sed 's/-lsnaplock\b/-l:libsnaplock.a/')
if readelf -d "$tmp/example-static" | grep -F libsnaplock; then die "example-static needs libsnaplock.so"; fi
SNAPLOCK_SOCKET=$sock timeout 60 "$tmp/example-static" || die "the static C example failed"

say "stop snaplockd (SIGTERM)"
kill -TERM "$agent"
for _ in $(seq 100); do
    kill -0 "$agent" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$agent" 2>/dev/null; then die "snaplockd still runs 10 s after SIGTERM"; fi
set +e
wait "$agent"
code=$?
set -e
agent=
[ "$code" -eq 0 ] || { cat "$tmp/agent.log" >&2; die "snaplockd exited with $code"; }
[ ! -e "$sock" ] || die "snaplockd left its socket"
# Its record of epoch and fences, kept for the next start.
head -n 1 "$tmp/state/ci.state" | grep -qx 'snaplock-state 1' \
    || die "snaplockd kept no record in $tmp/state/ci.state"

say "purge (dpkg --purge)"
DEBIAN_FRONTEND=noninteractive timeout 300 dpkg --purge "${packages[@]}"
installed=
for p in "${packages[@]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv 'not-installed'; then
        die "$p is still known to dpkg"
    fi
    while IFS= read -r f; do
        if [ "$f" = /. ]; then
            continue
        elif [ -d "$f" ]; then
            # Directories such as /usr/bin stay for the packages that share them.
            dpkg-query -S "$f" >/dev/null 2>&1 || die "the directory $f is left after the purge"
        elif [ -e "$f" ] || [ -L "$f" ]; then
            die "$f is left after the purge"
        fi
    done <"$tmp/$p.files"
done
for f in /etc/snaplock /var/lib/snaplock /etc/systemd/system/multi-user.target.wants/snaplock.service \
    /var/lib/systemd/deb-systemd-helper-enabled/snaplock.service.dsh-also \
    /var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/snaplock.service; do
    if [ -e "$f" ] || [ -L "$f" ]; then die "$f is left after the purge"; fi
done
if getent passwd snaplock; then die "the user snaplock is left after the purge"; fi
if getent group snaplock; then die "the group snaplock is left after the purge"; fi

say "ok: packages built, linted, installed, used and purged in $((SECONDS - started)) s"
