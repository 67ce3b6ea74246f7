#!/usr/bin/env bash
# The dashboard's search in a real browser (Debian's chromium, headless,
# playwright-core as tests/dashboard.sh installs it): the header's box finds
# a job by id (its page) or says there is none; the payload search page
# shows a search's progress and its matches while it runs, cancels it, and
# lists every match of a whole search. Screenshots, checked for the elements
# they must show: <build>/artifacts/search-*.png.
# Skipped (with the reason) only where chromium or npm cannot be installed.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test ds dashboard-search browser
# 5000 waiting jobs, every 10th holding "needle" (500 matches), and one by id
for i in $(seq 0 4999); do
    if [ $((i % 10)) = 0 ]; then echo "{\"kind\":\"mail\",\"to\":\"needle-$i@example.com\"}"; else echo "{\"kind\":\"mail\",\"n\":$i}"; fi
done | "$RJQ" --prefix ds enqueue sq - >/dev/null || { echo "FAIL: enqueue"; exit 1; }
"$RJQ" --prefix ds enqueue sq '{"kind":"invoice","customer":"acme"}' --id inv-42 >/dev/null || { echo "FAIL: enqueue inv-42"; exit 1; }
start_serve rw
cp "$SRC/tests/dashboard/search.mjs" "$PW/search.mjs" # resolves playwright-core from $PW
# shellcheck disable=SC2154 # (redis_pid, redis_port: set by redis_private_start)
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART REDIS_PID=$redis_pid REDIS_PORT=$redis_port timeout 200 node "$PW/search.mjs"
RC=$?
kill -CONT "$redis_pid" 2>/dev/null # (whatever became of the test)
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/rw.err"; }
# the server stops cleanly (under ASan: no leak, no error report)
stop_serve_clean rw || RC=1
exit $RC
