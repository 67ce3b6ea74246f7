#!/usr/bin/env bash
# The --demo page's four lists side by side (queued, processing, completed,
# failed) in a real browser (Debian's chromium, headless, playwright-core
# as tests/dashboard.sh installs it): jobs enqueued from the page show in
# each list with their kind, live (no reload), as the page's worker pool
# runs, fails and hangs them. Screenshot checked for the four lists and
# their rows: <build>/artifacts/demo-lists.png.
# Skipped (with the reason) only where chromium or npm cannot be installed.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test dd dashboard-demo browser
start_serve demo --demo
cp "$SRC/tests/dashboard/demo.mjs" "$PW/demo.mjs" # resolves playwright-core from $PW
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART timeout 150 node "$PW/demo.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/demo.err"; }
# the server stops cleanly (under ASan: no leak, no error report)
stop_serve_clean demo || RC=1
exit $RC
