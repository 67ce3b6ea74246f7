#!/usr/bin/env bash
# Run the rjq demo: scripts/demo.sh BUILD_DIR [rjq-demo options...]
#
# With REDIS_URL set, the demo runs against that server. Otherwise a private
# redis-server is started on a free port in a temporary folder (nothing is
# saved to disk) and stopped again, by its pid, when this script exits.
# Exits with the demo's status.
set -u

build=${1:?usage: scripts/demo.sh BUILD_DIR [rjq-demo options...]}
shift
demo="$build/rjq-demo"
if [ ! -x "$demo" ]; then
    echo "demo.sh: $demo not found; build first (make build)" >&2
    exit 1
fi

redis_dir=
redis_pid=

# PING over bash's /dev/tcp, so redis-cli is not needed.
redis_ping() {
    local port=$1 reply=
    { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
    printf 'PING\r\n' >&3
    IFS= read -r -t 1 reply <&3
    exec 3<&- 3>&-
    [[ $reply == +PONG* ]]
}

# A port nobody listens on (checked, then bound by redis-server: a race with
# another program is possible, so the caller retries with another port).
pick_port() {
    local port
    for _ in $(seq 50); do
        port=$((20000 + RANDOM % 40000))
        if ! { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
            echo "$port"
            return 0
        fi
        exec 3<&- 3>&-
    done
    return 1
}

# Is pid running? A daemonized redis-server is not our child: once it exits
# it stays a zombie until init reaps it, which can take a while, so a zombie
# counts as gone.
alive() {
    local stat
    kill -0 "$1" 2>/dev/null || return 1
    if [ -r "/proc/$1/stat" ]; then
        stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
        stat=${stat##*) }
        [ "${stat%% *}" != Z ]
    fi
}

stop_redis() {
    if [ -n "$redis_pid" ] && alive "$redis_pid"; then
        kill -TERM "$redis_pid" 2>/dev/null
        for _ in $(seq 200); do # up to 10 s
            alive "$redis_pid" || break
            sleep 0.05
        done
        if alive "$redis_pid"; then kill -KILL "$redis_pid" 2>/dev/null; fi
    fi
    redis_pid=
    if [ -n "$redis_dir" ]; then rm -rf "$redis_dir"; fi
    redis_dir=
}

start_redis() {
    if ! command -v redis-server >/dev/null; then
        echo "demo.sh: redis-server not found (install it, or set REDIS_URL)" >&2
        return 1
    fi
    redis_dir=$(mktemp -d "${TMPDIR:-/tmp}/rjq-demo-redis.XXXXXX") || return 1
    local port attempt
    for attempt in 1 2 3 4 5; do
        port=$(pick_port) || break
        rm -f "$redis_dir/redis.pid"
        redis-server --port "$port" --bind 127.0.0.1 --dir "$redis_dir" \
            --save '' --appendonly no --daemonize yes \
            --pidfile "$redis_dir/redis.pid" --logfile "$redis_dir/redis.log" >/dev/null || continue
        for _ in $(seq 200); do # up to 10 s
            [ -z "$redis_pid" ] && [ -s "$redis_dir/redis.pid" ] && redis_pid=$(cat "$redis_dir/redis.pid")
            if [ -n "$redis_pid" ] && redis_ping "$port"; then
                export REDIS_URL="redis://127.0.0.1:$port"
                return 0
            fi
            if [ -n "$redis_pid" ] && ! alive "$redis_pid"; then break; fi
            sleep 0.05
        done
        echo "demo.sh: redis-server on port $port did not start (attempt $attempt):" >&2
        tail -n 3 "$redis_dir/redis.log" >&2 2>/dev/null
        stop_redis_pid_only
    done
    echo "demo.sh: could not start redis-server" >&2
    return 1
}

# Between attempts: stop a half-started server, keep the folder.
stop_redis_pid_only() {
    local dir=$redis_dir
    redis_dir=
    stop_redis
    redis_dir=$dir
}

if [ -z "${REDIS_URL:-}" ]; then
    trap stop_redis EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    start_redis || exit 1
    echo "demo.sh: private redis-server (pid $redis_pid) at $REDIS_URL"
fi

"$demo" "$@"
