#!/bin/sh
# Builds the Debian packages snaplock, libsnaplock1 and libsnaplock-dev
# from this checkout:
#
#     packaging/build-deb.sh [OUTPUT_DIR]       (default: target/debian)
#
# The three .deb files land in OUTPUT_DIR, with the .changes (which lists
# them) and .buildinfo files; the -dbgsym packages (debug symbols) in
# OUTPUT_DIR/dbgsym.
#
# Why dpkg-buildpackage and debhelper rather than cargo-deb: they are
# Debian's own tools, packaged by Debian (cargo-deb would first need a
# `cargo install` from crates.io), and they give what hand-made archives
# lack: maintainer scripts that debhelper writes and lintian knows
# (dh_installsystemd enables the unit and starts it only where systemd
# runs), conffiles, shlibs dependencies, stripped binaries with -dbgsym
# packages, and a debian/ directory any Debian packager can read.
#
# dpkg-buildpackage wants debian/ at the top of the source tree, so the
# sources (the files git tracks, plus new ones it does not ignore) are
# copied with packaging/debian/ into OUTPUT_DIR/build/snaplock-VERSION.
# cargo's target directory stays in OUTPUT_DIR/build/cargo-target, so
# that the next build only recompiles what changed.
# snaplockd is built with a profile of its hot paths (packaging/pgo.sh,
# which needs llvm-profdata: Debian's llvm-19, installed here when missing
# and run as root); DEB_BUILD_OPTIONS=nopgo builds it plain.
# The Rust toolchain comes from rustup on Debian 12 (whose rustc is older
# than the workspace's rust-version), which dpkg's build-dependency check
# cannot see: this script checks the tools itself and passes -d.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/target/debian}
mkdir -p "$out"
out=$(cd "$out" && pwd)

say() { printf '== %s\n' "$*" >&2; }
die() { printf 'build-deb.sh: %s\n' "$*" >&2; exit 1; }

# Debian's tools: installed when missing and root, else named.
missing=
command -v dpkg-buildpackage >/dev/null || missing="$missing dpkg-dev"
command -v dh >/dev/null || missing="$missing debhelper"
command -v objdump >/dev/null || missing="$missing binutils"
if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        say "installing$missing"
        apt-get update -qq
        # shellcheck disable=SC2086 # one word per package
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
    else
        die "missing tools; install them with: sudo apt-get install$missing"
    fi
fi

# llvm-profdata, for the build of snaplockd with a profile of its hot
# paths (packaging/pgo.sh), unless DEB_BUILD_OPTIONS has nopgo.
case " ${DEB_BUILD_OPTIONS:-} " in
*" nopgo "*) ;;
*)
    have_profdata=${LLVM_PROFDATA:-}
    for p in "$(rustc --print sysroot 2>/dev/null)"/lib/rustlib/*/bin/llvm-profdata; do
        if [ -x "$p" ]; then have_profdata=$p; fi
    done
    if [ -z "$have_profdata" ]; then
        for p in /usr/bin/llvm-profdata-* /usr/bin/llvm-profdata; do
            if [ -x "$p" ]; then have_profdata=$p; fi
        done
    fi
    if [ -z "$have_profdata" ]; then
        if [ "$(id -u)" -eq 0 ]; then
            say "installing llvm-19 (llvm-profdata)"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends llvm-19 >/dev/null
        else
            die "no llvm-profdata; install it with: sudo apt-get install llvm-19 (or build with DEB_BUILD_OPTIONS=nopgo)"
        fi
    fi
    ;;
esac

# The Rust toolchain: at least the workspace's rust-version.
command -v cargo >/dev/null || die "cargo is not in PATH (see https://rustup.rs)"
need=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$repo/Cargo.toml")
have=$(rustc --version | sed -n 's/^rustc \([0-9][0-9.]*\).*/\1/p')
if [ -z "$need" ] || [ -z "$have" ]; then
    die "cannot read the Rust versions (need '$need', have '$have')"
fi
dpkg --compare-versions "$have" ge "$need" || die "rustc $have is older than the workspace's rust-version $need"

# The package's upstream version is the workspace's.
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)".*/\1/p' "$repo/Cargo.toml")
deb_version=$(dpkg-parsechangelog -l "$repo/packaging/debian/changelog" -S Version)
[ "${deb_version%-*}" = "$version" ] \
    || die "packaging/debian/changelog says $deb_version, Cargo.toml $version: add a changelog entry (dch -v $version-1)"

work=$out/build
src=$work/snaplock-$version
say "copying the sources to $src"
rm -rf "$src"
mkdir -p "$src"
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Files deleted but not yet committed are skipped.
    # shellcheck disable=SC2016 # the inner shell expands $f
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
        | tar --null -T - -cf -) | tar -xf - -C "$src"
else
    (cd "$repo" && tar --exclude=./target --exclude=./fuzz/target --exclude=./.git -cf - .) \
        | tar -xf - -C "$src"
fi
rm -rf "$src/debian"
cp -R "$repo/packaging/debian" "$src/debian"

say "dpkg-buildpackage (cargo build --release; snaplockd with a profile)"
rm -f "$work"/*.deb "$work"/*.ddeb "$work"/*.changes "$work"/*.buildinfo
(cd "$src" && CARGO_TARGET_DIR="$work/cargo-target" dpkg-buildpackage -us -uc -b -d)

# The .changes lists every file it describes, and lintian, dput or dcmd
# look for them beside it: the -dbgsym packages, which go to
# OUTPUT_DIR/dbgsym, leave it, so it is made again without them.
changes=$(cd "$work" && ls -- *.changes)
[ "$(printf '%s\n' "$changes" | wc -l)" -eq 1 ] || die "expected one .changes in $work, found: $changes"
say "$changes without the -dbgsym packages"
(
    cd "$src"
    mv debian/files debian/files.all
    grep -v -e '-dbgsym_' debian/files.all >debian/files
    dpkg-genchanges -b -u"$work" -O"$work/$changes"
)
if grep -q -e '-dbgsym_' "$work/$changes"; then die "$changes still lists -dbgsym packages"; fi

# Only this source's outputs are replaced in OUTPUT_DIR. The -dbgsym
# packages go to OUTPUT_DIR/dbgsym, so that OUTPUT_DIR/*.deb is what to
# install.
mkdir -p "$out/dbgsym"
for f in "$out"/snaplock_* "$out"/libsnaplock1_* "$out"/libsnaplock-dev_* \
    "$out"/dbgsym/snaplock-dbgsym_* "$out"/dbgsym/libsnaplock1-dbgsym_*; do
    if [ -e "$f" ]; then rm -f "$f"; fi
done
for f in "$work"/*-dbgsym_*.deb "$work"/*-dbgsym_*.ddeb; do
    if [ -e "$f" ]; then mv "$f" "$out"/dbgsym/; fi
done
for f in "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo; do
    if [ -e "$f" ]; then mv "$f" "$out"/; fi
done
rm -rf "$src"
say "packages in $out:"
ls -1 "$out"/*.deb >&2
