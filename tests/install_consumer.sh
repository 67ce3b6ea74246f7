#!/usr/bin/env bash
# Installing and linking: `cmake --install` of this build into a scratch
# prefix, then a program outside the tree (tests/consumer) built against it
# four ways: pkg-config (shared and static) and find_package(rjq)
# (rjq::rjq and rjq::rjq_static), and a C++ program on each loop glue
# (-Wold-style-cast), through the per-loop modules (rjq-libevent,
# rjq-libuv, rjq-libev; rjq::libevent, rjq::libuv, rjq::libev). Each must
# compile warning-free, link and run. A sanitized build's library needs the
# sanitizers in the consumer too. Also checked: rjq.pc pins the hiredis rjq
# was built with and brings no event loop; the install components; the
# literal prefix of an install into /usr; the RPATH to a hiredis outside the
# system's directories.
#
# ctest sets RJQ_BUILD (build folder) and RJQ_SOURCE (source folder).
# tests/consumer/debs.sh runs the consumers against the Debian packages
# instead: RJQ_INSTALLED_PREFIX names their unpacked /usr, RJQ_INSTALLED_PC
# a folder of their .pc files with that prefix (no cmake --install then).
set -eu

src=${RJQ_SOURCE:?RJQ_SOURCE must name the source folder}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

san="" hiredis_prefix=""
if [ -n "${RJQ_INSTALLED_PREFIX:-}" ]; then
    prefix=$RJQ_INSTALLED_PREFIX
    pcdir=${RJQ_INSTALLED_PC:?RJQ_INSTALLED_PC must name the folder of the .pc files}
else
    build=${RJQ_BUILD:?RJQ_BUILD must name the build folder}
    prefix=$tmp/prefix
    cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
    pc=$(find "$prefix" -name rjq.pc)
    [ -n "$pc" ] || fail "no rjq.pc installed"
    pcdir=$(dirname "$pc")
    if grep -q '^RJQ_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then san="-fsanitize=address,undefined"; fi
    # A hiredis outside the system paths (the 1.x builds of .ci/run): the
    # build's CMAKE_PREFIX_PATH is the consumer's too, for pkg-config, CMake
    # and the run-time linker.
    hiredis_prefix=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build/CMakeCache.txt")

    # a prefix other than /usr: the .pc files find it from their own place
    grep -q '^prefix=${pcfiledir}/' "$pc" || fail "rjq.pc of a custom prefix is not relocatable: $(head -1 "$pc")"
    # /usr: a literal prefix (pkgconf recognises its system directories only so)
    DESTDIR="$tmp/destdir" cmake --install "$build" --prefix /usr --component Development > /dev/null
    usr_pc=$(find "$tmp/destdir/usr" -name rjq.pc)
    for m in rjq rjq-libevent rjq-libuv rjq-libev rjq-glib; do
        [ -f "$(dirname "$usr_pc")/$m.pc" ] || fail "no $m.pc installed"
    done
    grep -qx 'prefix=/usr' "$usr_pc" || fail "rjq.pc of an install into /usr: $(head -1 "$usr_pc")"
    # the components: Runtime is the shared library alone, Tools the programs
    cmake --install "$build" --prefix "$tmp/runtime" --component Runtime > /dev/null
    (cd "$tmp/runtime" && find . -type f -o -type l) | sort > "$tmp/runtime.list"
    grep -q '/librjq\.so\.[0-9]' "$tmp/runtime.list" || fail "component Runtime lacks librjq.so.N"
    if grep -Ev '/librjq\.so\.[0-9.]+$|/doc/rjq/LICENSE$' "$tmp/runtime.list"; then
        fail "component Runtime holds more than the library (above)"
    fi
    cmake --install "$build" --prefix "$tmp/tools" --component Tools > /dev/null
    [ -x "$tmp/tools/bin/rjq" ] && [ ! -e "$tmp/tools/include/rjq.h" ] || fail "component Tools: $(cd "$tmp/tools" && find . -type f)"
    # with rjq's shell completion, which bash loads (complete -F _rjq rjq)
    [ -f "$tmp/tools/share/zsh/site-functions/_rjq" ] || fail "component Tools lacks _rjq (zsh)"
    bash -c '. "$1" && complete -p rjq' _ "$tmp/tools/share/bash-completion/completions/rjq" 2>&1 |
        grep -q -- '-F _rjq rjq$' || fail "component Tools: no bash completion of rjq"
fi
libdir=$(dirname "$(find "$prefix" -name 'librjq.so' | head -1)")
[ -f "$libdir/librjq.so" ] || fail "no librjq.so installed"

# (old-style RPATH: it also serves librjq.so's own dependencies)
extra_pc="" rpaths="-Wl,--disable-new-dtags -Wl,-rpath,$libdir"
for p in ${hiredis_prefix//;/ }; do
    for d in "$p"/lib*/pkgconfig; do if [ -d "$d" ]; then extra_pc="$extra_pc:$d"; fi; done
    for d in "$p"/lib*; do
        [ -d "$d" ] || continue
        rpaths="$rpaths -Wl,-rpath,$d"
        # the installed library and tool find that hiredis by themselves
        if ls "$d"/libhiredis.so* > /dev/null 2>&1; then
            readelf -d "$libdir/librjq.so" | grep -E 'R(UN)?PATH' | grep -qF "$d" ||
                fail "librjq.so has no RPATH to $d: $(readelf -d "$libdir/librjq.so" | grep -E 'R(UN)?PATH')"
        fi
    done
done
# the CLI and its man page, which names every command of its usage text
man=$(find "$prefix" -name 'rjq.1' -o -name 'rjq.1.gz' | head -1)
[ -n "$man" ] && [ -x "$prefix/bin/rjq" ] || fail "the rjq tool or its man page is not installed"
case $man in *.gz) gzip -dc "$man" > "$tmp/rjq.1"; man=$tmp/rjq.1 ;; esac
usage=$(env -u LD_LIBRARY_PATH "$prefix/bin/rjq" help 2>&1) || fail "the installed rjq does not run: $usage"
for cmd in $(echo "$usage" | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p'); do
    grep -qE "^(\.B[IR]? \"?|\\\\fB)$cmd( |\"|\\\\fR|$)" "$man" ||
        fail "the man page lacks the command $cmd"
done
if command -v groff >/dev/null; then
    warnings=$(groff -man -Tutf8 -ww -z "$man" 2>&1)
    [ -z "$warnings" ] || fail "groff warns about rjq.1: $warnings"
fi
export PKG_CONFIG_PATH="$pcdir$extra_pc"

# rjq.pc: the hiredis rjq was built with, exactly (0.14 and 1.x linked
# together crash), and no event loop; each loop module brings its loop only.
requires=$(pkg-config --print-requires rjq)
[ "$requires" = "hiredis = $(pkg-config --modversion hiredis)" ] ||
    fail "rjq.pc requires '$requires', not the hiredis it was built with ($(pkg-config --modversion hiredis))"
libs_of() { pkg-config --libs "$1" | tr ' ' '\n' | grep -E '^-l(event|uv|ev|glib)' | sort | tr '\n' ' '; }
[ "$(libs_of rjq)" = "" ] || fail "pkg-config --libs rjq brings an event loop: $(libs_of rjq)"
[ "$(libs_of rjq-libevent)" = "-levent_core " ] || fail "rjq-libevent: $(libs_of rjq-libevent)"
[ "$(libs_of rjq-libuv)" = "-luv " ] || fail "rjq-libuv: $(libs_of rjq-libuv)"
[ "$(libs_of rjq-libev)" = "-lev " ] || fail "rjq-libev: $(libs_of rjq-libev)"
glib=
if pkg-config --exists glib-2.0; then
    glib=glib
    [ "$(libs_of rjq-glib)" = "-lglib-2.0 " ] || fail "rjq-glib: $(libs_of rjq-glib)"
fi

cc=${CC:-cc}
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror $san -o "$tmp/pc_shared" "$src/tests/consumer/consumer.c" \
    $(pkg-config --cflags --libs rjq-libevent) $rpaths
"$tmp/pc_shared"
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror $san -o "$tmp/pc_static" "$src/tests/consumer/consumer.c" \
    $(pkg-config --cflags rjq-libevent) "$libdir/librjq.a" \
    $(pkg-config --static --libs rjq-libevent | sed 's/-lrjq//') $rpaths
"$tmp/pc_static"
ldd "$tmp/pc_static" | grep -q librjq && fail "the static consumer links librjq.so"

# C++: rjq.h and each loop glue, warning-free with -Wold-style-cast, each
# through its loop's module
cxx=${CXX:-c++}
if command -v "$cxx" >/dev/null; then
    for loop in libevent libev libuv $glib; do
        macro=$(echo "$loop" | tr a-z A-Z)
        # shellcheck disable=SC2046,SC2086
        # hiredis' and GLib's own headers are not ours to judge (1.x's
        # sds.h, GLib's macros have C casts): they are system headers here,
        # as they are in /usr/include.
        $cxx -std=c++11 -Wall -Wextra -Wold-style-cast -Werror $san -DGLUE_$macro -o "$tmp/cxx_$loop" \
            $(pkg-config --cflags-only-I hiredis ${glib:+glib-2.0} | sed 's/-I/-isystem /g') \
            "$src/tests/consumer/glue.cc" $(pkg-config --cflags --libs rjq-$loop) $rpaths
        "$tmp/cxx_$loop"
    done
fi

cmake -S "$src/tests/consumer" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix${hiredis_prefix:+;$hiredis_prefix}" \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san $rpaths" > "$tmp/configure.log" ||
    { cat "$tmp/configure.log" >&2; exit 1; }
cmake --build "$tmp/cmake" > "$tmp/build.log" || { cat "$tmp/build.log" >&2; exit 1; }
"$tmp/cmake/consumer_shared"
"$tmp/cmake/consumer_static"
for loop in libuv libev; do
    if [ -x "$tmp/cmake/glue_$loop" ]; then "$tmp/cmake/glue_$loop"; fi
done
echo "PASS: pkg-config and find_package consumers, shared and static; per-loop modules; C++ on each glue"
