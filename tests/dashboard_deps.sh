#!/usr/bin/env bash
# The dashboard's dependencies (issue 39: "a job page shows its dependencies
# and dependents", waiting jobs "shown in stats and the dashboard") in a real
# browser (Debian's chromium, headless, playwright-core as tests/dashboard.sh
# installs it): a queue page shows its waiting count and lists its waiting
# jobs in a tab; a waiting job's page shows each dependency (its state now
# and how it was counted) and its dependency's page its dependents; a
# waiting job cancelled from its page releases its dependent of policy run.
# Screenshot, checked for the elements it must show:
# <build>/artifacts/deps-job.png. Skipped (with the reason) only where
# chromium or npm cannot be installed.
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
serve_setup dashboard-deps
# a1 waits an hour (delayed); b1 and b2 wait for it (b1 for a job that
# never was too, policy ignore); c1 waits for b2 under policy run. No worker.
"$RJQ" --prefix dd enqueue da one --id a1 --delay 3600000 >/dev/null || exit 1
"$RJQ" --prefix dd enqueue db two --id b1 --after da:a1,da:nosuch --after-policy ignore >/dev/null || exit 1
"$RJQ" --prefix dd enqueue db three --id b2 --after da:a1 >/dev/null || exit 1
"$RJQ" --prefix dd enqueue dc four --id c1 --after db:b2 --after-policy run >/dev/null || exit 1
start_serve dd
cp "$SRC/tests/dashboard/deps.mjs" "$PW/deps.mjs" # resolves playwright-core from $PW
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART timeout 120 node "$PW/deps.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/dd.err"; }
stop_serve_clean dd || RC=1
exit $RC
