#!/usr/bin/env bash
# The demo under valgrind: no memory errors, no definite or indirect leaks,
# and the demo's own end-to-end check passes (Redis' counters and depths
# agree with what it did). Runs rjq-demo with DEMO_N=2000 and a few dead
# jobs against a private redis-server, stopped again by its pid.
#
# ctest sets RJQ_BUILD (build folder) and RJQ_SOURCE (source folder).
# Skips (exit 0) only when valgrind is not installed.
set -u

build=${RJQ_BUILD:?RJQ_BUILD must name the build folder}
demo="$build/rjq-demo"

if ! command -v valgrind >/dev/null; then
    echo "SKIP: valgrind is not installed"
    exit 0
fi
if [ ! -x "$demo" ]; then
    echo "FAIL: $demo not found (configure with RJQ_BUILD_EXAMPLES=ON)" >&2
    exit 1
fi
if ! command -v redis-server >/dev/null; then
    echo "FAIL: redis-server not found" >&2
    exit 1
fi
# valgrind cannot run an AddressSanitizer build (make test runs this test in
# the plain build only: -LE valgrind for the ASan pass).
if nm "$demo" 2>/dev/null | grep -q __asan_init; then
    echo "SKIP: $demo is an AddressSanitizer build; valgrind needs a plain one"
    exit 0
fi

# shellcheck source=tests/example_redis.bash
. "$(dirname "${BASH_SOURCE[0]}")/example_redis.bash"
example_redis_start demo-valgrind
echo "private redis-server (pid $redis_pid) at $REDIS_URL"

export DEMO_N=2000
log="$dir/valgrind.log"
valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --error-exitcode=99 --log-file="$log" \
    "$demo" --dead 5 --no-progress
status=$?

grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|still reachable|All heap blocks" "$log"
if [ "$status" -eq 99 ]; then
    echo "FAIL: valgrind reported errors or leaks:" >&2
    cat "$log" >&2
    exit 1
fi
if [ "$status" -ne 0 ]; then
    echo "FAIL: rjq-demo exited with status $status" >&2
    tail -n 30 "$log" >&2
    exit 1
fi
if ! grep -q "ERROR SUMMARY: 0 errors" "$log"; then
    echo "FAIL: valgrind did not report a clean run" >&2
    cat "$log" >&2
    exit 1
fi
echo "PASS: rjq-demo is valgrind-clean and its check passed"
