#!/usr/bin/env bash
# Installing and linking: `cmake --install` of this build into a scratch
# prefix, then a program outside the tree (tests/consumer) built against it
# four ways: pkg-config (shared and static) and find_package(rjq)
# (rjq::rjq and rjq::rjq_static), and a C++ program on each loop glue
# (-Wold-style-cast). Each must compile warning-free, link and run. A sanitized build's library needs the sanitizers in the consumer too.
#
# ctest sets RJQ_BUILD (build folder) and RJQ_SOURCE (source folder).
set -eu

build=${RJQ_BUILD:?RJQ_BUILD must name the build folder}
src=${RJQ_SOURCE:?RJQ_SOURCE must name the source folder}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
pc=$(find "$tmp/prefix" -name rjq.pc)
[ -n "$pc" ] || { echo "FAIL: no rjq.pc installed" >&2; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
san=""
if grep -q '^RJQ_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then san="-fsanitize=address,undefined"; fi

# A hiredis outside the system paths (the 1.x builds of .ci/run): the
# build's CMAKE_PREFIX_PATH is the consumer's too, for pkg-config, CMake
# and the run-time linker.
hiredis_prefix=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build/CMakeCache.txt")
# (old-style RPATH: it also serves librjq.so's own dependencies)
extra_pc="" rpaths="-Wl,--disable-new-dtags -Wl,-rpath,$libdir"
for p in ${hiredis_prefix//;/ }; do
    for d in "$p"/lib*/pkgconfig; do if [ -d "$d" ]; then extra_pc="$extra_pc:$d"; fi; done
    for d in "$p"/lib*; do if [ -d "$d" ]; then rpaths="$rpaths -Wl,-rpath,$d"; fi; done
done
# the CLI and its man page, which names every command of its usage text
man=$(find "$tmp/prefix" -name rjq.1)
[ -n "$man" ] && [ -x "$tmp/prefix/bin/rjq" ] || { echo "FAIL: the rjq tool or its man page is not installed" >&2; exit 1; }
for cmd in $("$tmp/prefix/bin/rjq" help 2>&1 | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p'); do
    grep -qE "^(\.B[IR]? \"?|\\\\fB)$cmd( |\"|\\\\fR|$)" "$man" ||
        { echo "FAIL: the man page lacks the command $cmd" >&2; exit 1; }
done
if command -v groff >/dev/null; then
    warnings=$(groff -man -Tutf8 -ww -z "$man" 2>&1)
    [ -z "$warnings" ] || { echo "FAIL: groff warns about rjq.1: $warnings" >&2; exit 1; }
fi
export PKG_CONFIG_PATH="$(dirname "$pc")$extra_pc"
cc=${CC:-cc}
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror $san -o "$tmp/pc_shared" "$src/tests/consumer/consumer.c" \
    $(pkg-config --cflags --libs rjq) $rpaths
"$tmp/pc_shared"
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror $san -o "$tmp/pc_static" "$src/tests/consumer/consumer.c" \
    $(pkg-config --cflags rjq) "$libdir/librjq.a" $(pkg-config --static --libs rjq | sed 's/-lrjq//') $rpaths
"$tmp/pc_static"
ldd "$tmp/pc_static" | grep -q librjq && { echo "FAIL: the static consumer links librjq.so" >&2; exit 1; }

# C++: rjq.h and each loop glue, warning-free with -Wold-style-cast
cxx=${CXX:-c++}
if command -v "$cxx" >/dev/null; then
    for glue in "LIBEVENT libevent_core" "LIBEV -lev" "LIBUV libuv"; do
        set -- $glue
        case $2 in -l*) libs=$2 ;; *) libs=$(pkg-config --libs "$2") ;; esac
        # shellcheck disable=SC2046,SC2086
        # hiredis' own headers are not ours to judge (1.x's sds.h has C
        # casts): they are system headers here, as they are in /usr/include.
        $cxx -std=c++11 -Wall -Wextra -Wold-style-cast -Werror $san -DGLUE_$1 -o "$tmp/cxx_$1" \
            $(pkg-config --cflags-only-I hiredis | sed 's/-I/-isystem /g') \
            "$src/tests/consumer/glue.cc" $(pkg-config --cflags --libs rjq) $libs $rpaths
        "$tmp/cxx_$1"
    done
fi

cmake -S "$src/tests/consumer" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix${hiredis_prefix:+;$hiredis_prefix}" \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san $rpaths" > "$tmp/configure.log" ||
    { cat "$tmp/configure.log" >&2; exit 1; }
cmake --build "$tmp/cmake" > "$tmp/build.log" || { cat "$tmp/build.log" >&2; exit 1; }
"$tmp/cmake/consumer_shared"
"$tmp/cmake/consumer_static"
echo "PASS: pkg-config and find_package consumers, shared and static; C++ on each glue"
