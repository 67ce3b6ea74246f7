#!/usr/bin/env bash
# examples/poll.c (rjq-poll: rjq on a plain poll() loop through rjq_io_ops)
# against a private redis-server: every await gets its job's result, and
# after rjq_client_free() the glue told every descriptor RJQ_IO_NONE and
# ran cleanup once (the example checks both and exits non-zero otherwise).
# Then the same under valgrind (no errors, no definite or indirect leaks)
# unless valgrind is missing or this is an AddressSanitizer build.
#
# ctest sets RJQ_BUILD (build folder) and RJQ_SOURCE (source folder).
set -u

build=${RJQ_BUILD:?RJQ_BUILD must name the build folder}
ex="$build/rjq-poll"
[ -x "$ex" ] || { echo "FAIL: $ex not found (configure with RJQ_BUILD_EXAMPLES=ON)" >&2; exit 1; }

# shellcheck source=tests/example_redis.bash
. "$(dirname "${BASH_SOURCE[0]}")/example_redis.bash"
example_redis_start poll-example

"$ex" 500 || { echo "FAIL: rjq-poll exited with status $?" >&2; exit 1; }

if ! command -v valgrind >/dev/null; then
    echo "PASS (valgrind not installed: not run under it)"
    exit 0
fi
if nm "$ex" 2>/dev/null | grep -q __asan_init; then
    echo "PASS (an AddressSanitizer build: not run under valgrind)"
    exit 0
fi
log="$dir/valgrind.log"
valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --error-exitcode=99 --log-file="$log" "$ex" 200
status=$?
grep -E "ERROR SUMMARY|definitely lost|indirectly lost" "$log"
if [ "$status" -ne 0 ]; then
    echo "FAIL: rjq-poll under valgrind exited with status $status" >&2
    cat "$log" >&2
    exit 1
fi
echo "PASS: rjq-poll ran right, also under valgrind"
