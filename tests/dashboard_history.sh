#!/usr/bin/env bash
# The queue page's history charts (README "History") in a real browser
# (chromium + playwright-core, as tests/dashboard.sh): throughput and
# wait/run p50/p99 drawn from GET /v1/queues/{q}/history; they show the
# jobs the --demo pool ran, again after a reload of the page, and again
# from a new rjq serve process (a restart) with no job run since.
# Screenshots, checked for the charts they must show:
# <build>/artifacts/history-*.png.
# Skipped (with the reason) only where chromium or npm cannot be installed.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test dh dashboard-history browser
start_serve first --demo --queues 'demo'
curl -s -o /dev/null -X POST "$BASE/v1/demo/pool?size=4&latency_ms=20&fail_pct=0&hang_pct=0" ||
    { echo "FAIL: pool"; exit 1; }
curl -s -o /dev/null -X POST "$BASE/v1/demo/enqueue?kind=report&n=20" || { echo "FAIL: enqueue"; exit 1; }
cp "$SRC/tests/dashboard/history.mjs" "$PW/history.mjs" # resolves playwright-core from $PW
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART PHASE=first timeout 120 node "$PW/history.mjs"
RC=$?
# another serve process: the same charts, from Redis
kill "$SPID"
wait "$SPID"; SERVE_RC=$?
if [ "$SERVE_RC" != 0 ] || grep -q 'Sanitizer\|runtime error' "$DIR/first.err"; then
    echo "FAIL: serve exit $SERVE_RC: $(grep -A5 Sanitizer "$DIR/first.err" | head -20)"; RC=1
fi
start_serve restarted --queues 'demo'
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART PHASE=restarted timeout 120 node "$PW/history.mjs" || RC=1
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/first.err"; }
exit $RC
