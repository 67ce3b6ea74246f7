#!/usr/bin/env bash
# The --demo page's four lists side by side (queued, processing, completed,
# failed) in a real browser (Debian's chromium, headless, playwright-core
# as tests/dashboard.sh installs it): jobs enqueued from the page show in
# each list with their kind, live (no reload), as the page's worker pool
# runs, fails and hangs them. Screenshot checked for the four lists and
# their rows: <build>/artifacts/demo-lists.png.
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
SERVE_PREFIX=dd
ART="$BUILD/artifacts"
mkdir -p "$ART"
serve_setup dashboard-demo
start_serve demo --demo
cp "$SRC/tests/dashboard/demo.mjs" "$PW/demo.mjs" # resolves playwright-core from $PW
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART timeout 150 node "$PW/demo.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/demo.err"; }
# the server stops cleanly (under ASan: no leak, no error report)
stop_serve_clean demo || RC=1
exit $RC
