#!/usr/bin/env bash
# The dashboard's batch page in a real browser (Debian's chromium, headless,
# playwright-core as tests/dashboard.sh installs it), and the serve API it
# reads (GET /v1/queues/{q}/batches, GET/DELETE /v1/queues/{q}/batches/{id}):
# the queue page lists its batches (by state), each linked to its page; a
# member's job page links to its batch; the batch page shows its state, counts and completion jobs
# and follows the batch to its end (its members cancelled through the API);
# a completion job's page links back; a refresh of the queue page keeps the
# batches "more" added, and a "more" still in flight when a refresh lands; a
# queue with nothing but batches has a head of zeros. Screenshot, checked for the elements
# it must show: <build>/artifacts/batches-batch.png, batches-list.png.
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
SERVE_PREFIX=db
ART="$BUILD/artifacts"
mkdir -p "$ART"
serve_setup dashboard-batches
# a batch of two members of another queue, sealed; they wait (no worker)
"$RJQ" --prefix db batch bq --create --id b1 --on-complete done --on-success good >/dev/null || exit 1
"$RJQ" --prefix db batch bq b1 --add mq --payload one --job-id m1 >/dev/null || exit 1
"$RJQ" --prefix db batch bq b1 --add mq --payload two --job-id m2 >/dev/null || exit 1
"$RJQ" --prefix db batch bq b1 --seal >/dev/null || exit 1
# queue pq: 25 batches, more than the queue page's page of 20, and nothing
# else: its page's head shows its zeros (its stats say it exists; they said
# it did not, so its own read answered 404 and the error took the head)
for i in $(seq -w 1 25); do "$RJQ" --prefix db batch pq --create --id "p$i" >/dev/null || exit 1; done
start_serve ba
cp "$SRC/tests/dashboard/batches.mjs" "$PW/batches.mjs" # resolves playwright-core from $PW
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART timeout 120 node "$PW/batches.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/ba.err"; }
stop_serve_clean ba || RC=1
exit $RC
