#!/usr/bin/env bash
# The dashboard's job rows in a real browser (Debian's chromium, headless,
# playwright-core as tests/dashboard.sh installs it): the lists show each
# job's kind or payload, attempts, times, error and worker for jobs in
# several states, the job page its times and worker, and 3 jobs selected
# are cancelled at once ("3 jobs cancelled"); "run now" on a delayed row,
# on two selected and on a delayed job's page makes them ready; pages by
# cursor (more, first) list 55 jobs once. Screenshots, checked for the
# elements they must show: <build>/artifacts/rows-*.png.
# Skipped (with the reason) only where chromium or npm cannot be installed.
set -u
BUILD=${RJQ_BUILD:?RJQ_BUILD must name the build directory}
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
RJQ="$BUILD/rjq"
WORKER="$BUILD/rjq-gateway_worker"
PW_VERSION=1.65.1
"$RJQ" serve --listen x 2>&1 | grep -q "built without" && { echo "SKIP: rjq built without serve"; exit 0; }
[ -x "$WORKER" ] || { echo "FAIL: $WORKER not built"; exit 1; }
# shellcheck source=tests/browser_setup.bash
. "$SRC/tests/browser_setup.bash"

# shellcheck source=scripts/redis-private.sh
. "$SRC/scripts/redis-private.sh"
# shellcheck source=tests/serve_helpers.bash
. "$SRC/tests/serve_helpers.bash"
SERVE_PREFIX=dr
ART="$BUILD/artifacts"
mkdir -p "$ART"
serve_setup dashboard-rows
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
