#!/usr/bin/env bash
# The dashboard's job rows in a real browser (Debian's chromium, headless,
# playwright-core as tests/dashboard.sh installs it): the lists show each
# job's kind or payload, attempts, times, error and worker for jobs in
# several states, the job page its times and worker, and 3 jobs selected
# are cancelled at once ("3 jobs cancelled"); "run now" on a delayed row,
# on two selected and on a delayed job's page makes them ready; pages by
# cursor (more, first) list 55 jobs once, and a refresh of the first page
# still in flight when "more" is clicked is not drawn over page 2. Screenshots, checked for the
# elements they must show: <build>/artifacts/rows-*.png.
# Skipped (with the reason) only where chromium or npm cannot be installed.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test dr dashboard-rows browser worker
start_serve rw
"$WORKER" -r "$redis_url" -P dr rq >"$DIR/worker.log" 2>&1 &
WPID=$!
PIDS+=("$WPID")
cp "$SRC/tests/dashboard/rows.mjs" "$PW/rows.mjs" # resolves playwright-core from $PW
BASE=$BASE WPID=$WPID HOST=$(hostname) CHROMIUM=$CHROMIUM ART=$ART timeout 120 node "$PW/rows.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/rw.err"; }
# the server stops cleanly (under ASan: no leak, no error report)
stop_serve_clean rw || RC=1
exit $RC
