#!/usr/bin/env bash
# The dashboard with Redis gone and back, in a real browser (Debian's
# chromium, headless, playwright-core as tests/dashboard.sh installs it):
# the test's own redis-server is stopped by its pid while the overview is
# open; the page turns red ("redis down" badge, "Redis is unreachable"
# warning), and once a redis-server listens on that port again it
# recovers (badge live, warning gone, a queue enqueued then listed). The
# queue page open meanwhile hides its job rows, charts, settings and
# processes read before (a red note says why) and reads them again after.
# Screenshots, checked for the elements they must show:
# <build>/artifacts/redis-down*.png.
# Skipped (with the reason) only where chromium or npm cannot be installed.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test rd dashboard-redis-down browser
# the second redis-server (started by the page's script on the same port):
# stopped by its pid, from its pid file, on exit
stop_second() {
    [ -s "$DIR/redis2.pid" ] && kill "$(cat "$DIR/redis2.pid")" 2>/dev/null
    for _ in $(seq 100); do [ -s "$DIR/redis2.pid" ] && kill -0 "$(cat "$DIR/redis2.pid")" 2>/dev/null || break; sleep 0.05; done
    serve_cleanup
}
trap stop_second EXIT
start_serve down
cp "$SRC/tests/dashboard/redis_down.mjs" "$PW/redis_down.mjs" # resolves playwright-core from $PW
BASE=$BASE REDIS_PID=$redis_pid REDIS_PORT=$redis_port DIR=$DIR CHROMIUM=$CHROMIUM ART=$ART \
    timeout 150 node "$PW/redis_down.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/down.err"; }
# the server stops cleanly (under ASan: no leak, no error report)
stop_serve_clean down || RC=1
exit $RC
