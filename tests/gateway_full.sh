#!/usr/bin/env bash
# The gateway on a bounded queue (--max-waiting 2, no worker): two requests
# are taken (and time out waiting: 504), the third is refused at once with
# 429 and Retry-After, and nothing more was enqueued.
set -u
BUILD=${RJQ_BUILD:?RJQ_BUILD must name the build directory}
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
GW="$BUILD/rjq-gateway"
[ -x "$GW" ] || { echo "SKIP: $GW not built"; exit 0; }
# shellcheck source=scripts/redis-private.sh
. "$SRC/scripts/redis-private.sh"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rjq-gwfull.XXXXXX")
GWPID=
cleanup() {
    if [ -n "$GWPID" ]; then kill "$GWPID" 2>/dev/null; wait "$GWPID" 2>/dev/null; fi
    redis_private_stop
    rm -rf "$DIR"
}
trap cleanup EXIT
redis_private_start "$DIR" || { echo "FAIL: redis-server"; exit 1; }
healthy() {
    { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null || return 1
    printf 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3
    timeout 2 head -1 <&3 | grep -q " 200 "
    local ok=$?
    exec 3<&-
    return $ok
}
# Start it, healthy within 20 s (a sanitized build is slow to start);
# another port when the one picked was taken meanwhile.
for _ in 1 2 3; do
    PORT=$(redis_free_port)
    "$GW" --port "$PORT" --redis "$redis_url" --prefix gwf --max-waiting 2 >"$DIR/gw.log" 2>&1 &
    GWPID=$!
    for _ in $(seq 400); do
        healthy && break 2
        kill -0 "$GWPID" 2>/dev/null || break
        sleep 0.05
    done
    kill "$GWPID" 2>/dev/null; wait "$GWPID" 2>/dev/null; GWPID=
done
[ -n "$GWPID" ] || { echo "FAIL: the gateway did not start: $(tail -5 "$DIR/gw.log")"; exit 1; }

post() { # body -> the whole response in $DIR/resp
    exec 3<>"/dev/tcp/127.0.0.1/$PORT"
    printf 'POST /jobs/bounded?timeout_ms=200 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
        "${#1}" "$1" >&3
    timeout 5 cat <&3 >"$DIR/resp"
    exec 3<&-
}
fail=0
for b in one two; do
    post "$b"
    head -1 "$DIR/resp" | grep -q " 504 " || { echo "FAIL: $b: $(head -1 "$DIR/resp")"; fail=1; }
done
post three
head -1 "$DIR/resp" | grep -q " 429 " || { echo "FAIL: three: $(head -1 "$DIR/resp")"; fail=1; }
grep -qi "^Retry-After: 1" "$DIR/resp" || { echo "FAIL: no Retry-After"; fail=1; }
grep -q "max_waiting 2" "$DIR/resp" || { echo "FAIL: the body does not say why"; fail=1; }
n=$(redis-cli -p "$redis_port" LLEN 'gwf:{bounded}:ready')
[ "$n" = 2 ] || { echo "FAIL: $n jobs waiting, not 2"; fail=1; }
[ "$fail" = 0 ] && echo "PASS: a full queue answers 429 and enqueues nothing"
exit "$fail"
