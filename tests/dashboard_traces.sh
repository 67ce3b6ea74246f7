#!/usr/bin/env bash
# The dashboard's job page shows a job's headers in a real browser
# (Debian's chromium, headless, playwright-core as tests/dashboard.sh
# installs it): the traceparent and tracestate rjq serve copied from the
# enqueue request, and "none" for a job without. Screenshot, checked for
# the elements it must show: <build>/artifacts/traces-job.png.
# Skipped (with the reason) only where chromium or npm cannot be installed.
set -u
BUILD=${RJQ_BUILD:?RJQ_BUILD must name the build directory}
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
RJQ="$BUILD/rjq"
PW_VERSION=1.65.1
"$RJQ" serve --listen x 2>&1 | grep -q "built without" && { echo "SKIP: rjq built without serve"; exit 0; }
# shellcheck source=tests/browser_setup.bash
. "$SRC/tests/browser_setup.bash"

# shellcheck source=scripts/redis-private.sh
. "$SRC/scripts/redis-private.sh"
# shellcheck source=tests/serve_helpers.bash
. "$SRC/tests/serve_helpers.bash"
SERVE_PREFIX=dt
ART="$BUILD/artifacts"
mkdir -p "$ART"
serve_setup dashboard-traces
start_serve tr
cp "$SRC/tests/dashboard/traces.mjs" "$PW/traces.mjs" # resolves playwright-core from $PW
TP=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
BASE=$BASE TP=$TP CHROMIUM=$CHROMIUM ART=$ART timeout 120 node "$PW/traces.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/tr.err"; }
stop_serve_clean tr || RC=1
exit $RC
