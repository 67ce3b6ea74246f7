# Shared by the rjq serve tests (tool_serve*.sh, dashboard.sh); sourced, not
# a test itself (ctest runs tests/*.sh), after scripts/redis-private.sh.
# Needs RJQ (the rjq binary) and SERVE_PREFIX (the key prefix); serve_setup
# sets DIR (the test's folder) and PIDS (an array).
# shellcheck shell=bash

# serve_setup NAME: a fresh folder DIR (rjq-NAME.XXXXXX), PIDS empty, a
# private redis-server (RJQ_URL exported to it) and, on exit, PIDS stopped,
# that server stopped and DIR removed. In this shell, never in $(...).
serve_setup() {
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/rjq-$1.XXXXXX")
    PIDS=()
    trap serve_cleanup EXIT
    trap 'exit 1' INT TERM
    redis_private_start "$DIR" || { echo "FAIL: redis-server"; exit 1; }
    # shellcheck disable=SC2154 # (redis_url: set by redis_private_start)
    export RJQ_URL=$redis_url
}

serve_cleanup() {
    stop_pids
    redis_private_stop
    rm -rf "$DIR"
}

# start_serve NAME ARGS...: start `rjq serve` on a free port, in this shell
# (its pid must reach PIDS for the cleanup: never call it in $(...)); sets
# BASE (its URL) and SPID once it answers /healthz with Redis connected.
start_serve() {
    local name=$1; shift
    "$RJQ" --prefix "$SERVE_PREFIX" serve --listen 127.0.0.1:0 "$@" >"$DIR/$name.out" 2>"$DIR/$name.err" &
    SPID=$!
    PIDS+=("$SPID")
    for _ in $(seq 400); do
        grep -q "^listening on" "$DIR/$name.out" 2>/dev/null && break
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.05
    done
    BASE="http://$(sed -n 's/^listening on //p' "$DIR/$name.out")"
    [ "$BASE" != "http://" ] || { echo "FAIL: $name did not start: $(cat "$DIR/$name.err")"; exit 1; }
    for _ in $(seq 200); do # Redis connected
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/healthz")" = 200 ] && return
        sleep 0.05
    done
    echo "FAIL: $name never healthy: $(cat "$DIR/$name.err")"; exit 1
}

# stop_pids: every pid of PIDS by SIGTERM, then SIGKILL what still runs 5 s
# later (a worker stopping with its Redis gone waits for it).
stop_pids() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
}

# stop_serve_clean NAME: stop the server start_serve NAME started (SPID) and
# check it stopped cleanly (exit 0; under ASan: no leak, no error report in
# DIR/NAME.err); says FAIL and returns 1 where it did not.
stop_serve_clean() {
    local rc
    kill "$SPID"
    wait "$SPID"; rc=$?
    if [ "$rc" != 0 ] || grep -q 'Sanitizer\|runtime error' "$DIR/$1.err"; then
        echo "FAIL: serve exit $rc: $(grep -A5 Sanitizer "$DIR/$1.err" | head -20)"; return 1
    fi
}
