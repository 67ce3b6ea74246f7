#!/usr/bin/env bash
# The Debian packages: `dpkg-buildpackage -us -uc -b` on a copy of the
# source tree (DEB_BUILD_OPTIONS=nocheck: the package's own test run is left
# out; noautodbgsym: no -dbgsym packages), lintian without errors, then
# librjq0, librjq-dev and rjq-tools unpacked into a scratch root (dpkg -x:
# nothing is installed on the system) and tests/install_consumer.sh's
# consumers built against them. Also checked: each package's files, and
# that the .pc files of /usr say prefix=/usr literally (pkgconf then leaves
# out -I/usr/include).
#
# A dpkg-buildpackage run compiles the library and tools (about a minute at
# -j2, lintian half a minute more), so ctest runs this in the first pass of
# `make test` only (label deb; the ASan build does not register it).
# RJQ_DEB_JOBS: its parallelism (default 2). ctest sets RJQ_SOURCE (source folder).
set -eu
src=${RJQ_SOURCE:?RJQ_SOURCE must name the source folder}
fail() { echo "FAIL: $*" >&2; exit 1; }
for t in dpkg-buildpackage dh lintian; do
    command -v $t > /dev/null || fail "$t is missing (scripts/install-deps.sh installs it)"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the tree without build folders and earlier package builds
mkdir "$tmp/src"
tar -C "$src" --exclude=./.git --exclude='./build*' --exclude='./obj-*' --exclude=./debian/tmp \
    --exclude=./debian/.debhelper --exclude=./debian/librjq0 --exclude=./debian/librjq-dev \
    --exclude=./debian/rjq-tools --exclude=./debian/files --exclude='./debian/*.substvars' \
    --exclude='./debian/*.log' --exclude=./debian/debhelper-build-stamp -cf - . | tar -C "$tmp/src" -xf -
start=$(date +%s)
(cd "$tmp/src" && DEB_BUILD_OPTIONS="nocheck noautodbgsym parallel=${RJQ_DEB_JOBS:-2}" dpkg-buildpackage -us -uc -b) \
    > "$tmp/dpkg.log" 2>&1 || { tail -n 60 "$tmp/dpkg.log" >&2; fail "dpkg-buildpackage failed"; }
echo "dpkg-buildpackage: $(($(date +%s) - start)) s"
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for p in librjq0 librjq-dev rjq-tools; do
    deb=$(ls "$tmp"/${p}_*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || fail "no $p package built"
    dpkg-deb -c "$deb" | awk '{print $6}' | sed 's,^\./,/,' > "$tmp/$p.list"
done
has() { grep -qx "$2" "$tmp/$1.list" || fail "$1 lacks $2: $(cat "$tmp/$1.list")"; }
has librjq0 "/usr/lib/$ma/librjq.so.0"
grep -q '/include/\|\.a$\|/bin/' "$tmp/librjq0.list" && fail "librjq0 holds more than the library"
hv=$(pkg-config --modversion hiredis)
dpkg-deb -f "$tmp"/librjq-dev_*.deb Depends | grep -qF "libhiredis-dev (>= $hv), libhiredis-dev (<< $hv.~)" ||
    fail "librjq-dev does not pin hiredis $hv: $(dpkg-deb -f "$tmp"/librjq-dev_*.deb Depends)"
has librjq-dev /usr/include/rjq.h
for h in libevent libuv libev; do has librjq-dev "/usr/include/rjq/$h.h"; done
has librjq-dev "/usr/lib/$ma/librjq.so"
has librjq-dev "/usr/lib/$ma/librjq.a"
for m in rjq rjq-libevent rjq-libuv rjq-libev; do has librjq-dev "/usr/lib/$ma/pkgconfig/$m.pc"; done
has librjq-dev "/usr/lib/$ma/cmake/rjq/rjqConfig.cmake"
for b in rjq rjq-pg-bridge; do
    has rjq-tools "/usr/bin/$b"
    has rjq-tools "/usr/share/man/man1/$b.1.gz"
done
has rjq-tools /usr/share/bash-completion/completions/rjq
has rjq-tools /usr/share/zsh/vendor-completions/_rjq

# lintian: no errors (warnings are printed)
start=$(date +%s)
lintian --fail-on error "$tmp"/*.changes > "$tmp/lintian.log" 2>&1 ||
    { cat "$tmp/lintian.log" >&2; fail "lintian reports errors"; }
cat "$tmp/lintian.log"
echo "lintian: $(($(date +%s) - start)) s"

root=$tmp/root
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$root"; done
pcdir=$root/usr/lib/$ma/pkgconfig
grep -qx 'prefix=/usr' "$pcdir/rjq.pc" || fail "rjq.pc of the package: $(head -1 "$pcdir/rjq.pc")"
# as installed in /usr, pkgconf leaves out its system directories
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs rjq-libevent)
case " $flags " in
    *" -I/usr/include "* | *" -L/usr/lib/$ma "*) fail "system directories in the flags: $flags" ;;
esac
# The consumers, against the unpacked root: its .pc files with the root's
# /usr as their prefix, the CMake package relocatable as it is.
mkdir "$tmp/pc"
for f in "$pcdir"/*.pc; do sed "s|^prefix=/usr\$|prefix=$root/usr|" "$f" > "$tmp/pc/$(basename "$f")"; done
RJQ_INSTALLED_PREFIX=$root/usr RJQ_INSTALLED_PC=$tmp/pc bash "$src/tests/install_consumer.sh"
echo "PASS: librjq0, librjq-dev and rjq-tools built, lintian-clean of errors, consumers built against them"
