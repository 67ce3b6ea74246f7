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
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test ds dashboard-shards browser

"$RJQ" --prefix ds shards hot 3 >/dev/null || { echo "FAIL: rjq shards hot 3"; exit 1; }
"$RJQ" --prefix ds enqueue cold x --id c1 >/dev/null || { echo "FAIL: rjq enqueue cold"; exit 1; }
start_serve rw
cp "$SRC/tests/dashboard/shards.mjs" "$PW/shards.mjs" # resolves playwright-core from $PW
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART timeout 120 node "$PW/shards.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/rw.err"; }
exit $RC
