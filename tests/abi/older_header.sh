#!/usr/bin/env bash
# A program built against an older rjq.h keeps working with this library
# (README "ABI"): tests/abi/older_consumer.c is compiled against a copy of
# include/rjq.h without the fields added last to three of its structs (as
# the header of a release before them would be), linked with this build's
# librjq.so, and run against a private redis-server: it enqueues, works
# and awaits a job. ctest sets RJQ_BUILD and RJQ_SOURCE.
set -euo pipefail
src=${RJQ_SOURCE:?} build=${RJQ_BUILD:?}
dir=$(mktemp -d "${TMPDIR:-/tmp}/rjq-older.XXXXXX")
# shellcheck source=scripts/redis-private.sh
. "$src/scripts/redis-private.sh"
cleanup() { redis_private_stop; rm -rf "$dir"; }
trap cleanup EXIT

/usr/bin/python3 - "$src/include/rjq.h" "$dir/rjq.h" <<'PY'
import sys
s = open(sys.argv[1]).read()
def drop(old, new):
    global s
    if s.count(old) != 1:
        sys.exit("older_header.sh: rjq.h changed, update the cut: " + old.splitlines()[0])
    s = s.replace(old, new)
# rjq_loop_ops before watch_fd and unwatch_fd
drop("""    void *(*watch_fd)(void *loop, int fd, int want_read, int want_write, rjq_fd_fn *cb, void *arg);
    void (*unwatch_fd)(void *loop, void *handle);
} rjq_loop_ops;""", "} rjq_loop_ops;")
# rjq_client_options before wait_replicas (and the fields after it)
i = s.index("    int wait_replicas;")
j = s.index("} rjq_client_options;")
s = s[:i] + s[j:]
# rjq_job_options before dedup_ms
i = s.index("    long long dedup_ms;")
j = s.index("} rjq_job_options;")
s = s[:i] + s[j:]
# rjq_group_info before started (an array handed to a callback: read with
# rjq_group_info_get)
i = s.index("    long long started;   /* the jobs it started")
j = s.index("} rjq_group_info;")
s = s[:i] + s[j:]
open(sys.argv[2], "w").write(s)
PY
grep -q "int wait_replicas;" "$dir/rjq.h" && { echo "FAIL: the cut left wait_replicas"; exit 1; }
# The hiredis the library was built with, also for the program (0.14 and
# 1.x in one process crash): a hiredis outside the system paths (the 1.x
# builds of make test-hiredis) is the build's CMAKE_PREFIX_PATH.
rpaths="-Wl,-rpath,$build"
hiredis_prefix=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build/CMakeCache.txt")
for p in ${hiredis_prefix//;/ }; do
    for d in "$p"/lib*/pkgconfig; do [ -d "$d" ] && PKG_CONFIG_PATH="$d${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"; done
    for d in "$p"/lib*; do [ -d "$d" ] && rpaths="$rpaths -Wl,-rpath,$d"; done
done
export PKG_CONFIG_PATH
# shellcheck disable=SC2086 # (word splitting of the flags is meant)
cc -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$dir" $(pkg-config --cflags hiredis libevent) \
   -o "$dir/older" "$src/tests/abi/older_consumer.c" -L"$build" $rpaths -lrjq \
   $(pkg-config --libs hiredis libevent)
# (the library it runs with is this build's, whose structs are bigger)
ldd "$dir/older" > "$dir/ldd"
grep -q "=> $build/librjq.so" "$dir/ldd" || { echo "FAIL: not linked with $build/librjq.so:"; cat "$dir/ldd"; exit 1; }
redis_private_start "$dir" || { echo "FAIL: could not start redis-server"; exit 1; }
# the groups it lists (by this build's rjq: the older header has no group option)
for g in ga ga ga gb gb gc; do
    "$build/rjq" -u "$redis_url" --prefix older enqueue --group $g grp x > /dev/null
done
"$dir/older" "$redis_url"
echo "ok: a program built against the older header enqueued, ran and awaited a job, and read groups"
