#!/usr/bin/env bash
# Every loop glue under valgrind (the loops' own libraries are not
# instrumented, so AddressSanitizer cannot see a handle of libev, libuv,
# GLib or libevent used after the glue freed it): the shared adapter cases
# (tests/adapter_cases.h) jobs and awaits, killed connections and the
# client freed inside a handler, on libevent, libev, libuv, GLib and
# rjq_io_ops over poll(); no memory error, no definite or indirect leak.
set -eu
build=${RJQ_BUILD:?RJQ_BUILD must name the build folder}
if grep -q '^RJQ_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
    echo "SKIP: a sanitized build does not run under valgrind"
    exit 0
fi
command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed"; exit 0; }
run() { # <test program> <case prefix>
    local prog=$build/tests/$1
    if [ ! -x "$prog" ]; then
        echo "SKIP: $1 (not built)"
        return
    fi
    for c in runs_jobs_and_awaits survives_killed_connections client_freed_inside_a_handler; do
        valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
            "$prog" "$2_$c"
    done
}
run test_adapter_libevent libevent_glue
run test_adapter_libev libev_glue
run test_adapter_libuv libuv_glue
run test_adapter_glib glib_glue
run test_adapter_poll io_ops_on_poll
echo "PASS: every loop glue under valgrind"
