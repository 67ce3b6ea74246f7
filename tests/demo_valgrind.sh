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

dir=$(mktemp -d "${TMPDIR:-/tmp}/rjq-demo-valgrind.XXXXXX") || exit 1
redis_pid=

# A daemonized redis-server is not our child: once it exits it stays a
# zombie until init reaps it, so a zombie counts as gone.
alive() {
    local stat
    kill -0 "$1" 2>/dev/null || return 1
    if [ -r "/proc/$1/stat" ]; then
        stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
        stat=${stat##*) }
        [ "${stat%% *}" != Z ]
    fi
}

cleanup() {
    if [ -n "$redis_pid" ] && alive "$redis_pid"; then
        kill -TERM "$redis_pid" 2>/dev/null
        for _ in $(seq 200); do
            alive "$redis_pid" || break
            sleep 0.05
        done
        if alive "$redis_pid"; then kill -KILL "$redis_pid" 2>/dev/null; fi
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

redis_ping() {
    local reply=
    { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
    printf 'PING\r\n' >&3
    IFS= read -r -t 1 reply <&3
    exec 3<&- 3>&-
    [[ $reply == +PONG* ]]
}

# Start redis-server on a free port (retrying if another program takes the
# port between the check and the bind).
start_redis() {
    local port attempt
    for attempt in 1 2 3 4 5; do
        for _ in $(seq 50); do
            port=$((20000 + RANDOM % 40000))
            { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || break
            exec 3<&- 3>&-
        done
        rm -f "$dir/redis.pid"
        redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" \
            --save '' --appendonly no --daemonize yes \
            --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >/dev/null || continue
        redis_pid=
        for _ in $(seq 200); do
            [ -z "$redis_pid" ] && [ -s "$dir/redis.pid" ] && redis_pid=$(cat "$dir/redis.pid")
            if [ -n "$redis_pid" ] && redis_ping "$port"; then
                export REDIS_URL="redis://127.0.0.1:$port"
                return 0
            fi
            if [ -n "$redis_pid" ] && ! alive "$redis_pid"; then break; fi
            sleep 0.05
        done
        echo "redis-server on port $port did not start (attempt $attempt)" >&2
        tail -n 3 "$dir/redis.log" >&2 2>/dev/null
        if [ -n "$redis_pid" ] && alive "$redis_pid"; then kill -KILL "$redis_pid"; fi
        redis_pid=
    done
    return 1
}

start_redis || { echo "FAIL: could not start redis-server" >&2; exit 1; }
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
