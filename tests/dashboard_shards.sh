#!/usr/bin/env bash
# The dashboard with a sharded queue (README "Sharded queues") in a real
# browser (chromium + playwright-core, as tests/dashboard.sh): the overview
# has one row for the queue, with its shard count, and none for its shards;
# its page shows the per-shard table (name, master, numbers) and the jobs
# enqueued from the page land on the shards; a shard opened on its own
# says which queue it belongs to; the anonymous jobs' ids are unique (made
# by the library, docs/sharding.md 6a) and a job's page answers 200, and a
# job put on a shard directly (a server-assigned id) links to its shard's
# route. Screenshots: <build>/artifacts/.
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
SERVE_PREFIX=ds
ART="$BUILD/artifacts"
mkdir -p "$ART"
serve_setup dashboard-shards

"$RJQ" --prefix ds shards hot 3 >/dev/null || { echo "FAIL: rjq shards hot 3"; exit 1; }
"$RJQ" --prefix ds enqueue cold x >/dev/null || { echo "FAIL: rjq enqueue cold"; exit 1; }
start_serve rw
cp "$SRC/tests/dashboard/shards.mjs" "$PW/shards.mjs" # resolves playwright-core from $PW
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART timeout 120 node "$PW/shards.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/rw.err"; }
exit $RC
