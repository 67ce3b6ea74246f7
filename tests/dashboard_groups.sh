#!/usr/bin/env bash
# The dashboard's queue page and job groups (README "Groups") in a real
# browser (chromium + playwright-core, as tests/dashboard.sh): the busiest
# groups, deepest first, with their ready and running jobs, limits (rate
# and bound too) and pause; a group paused and resumed from the page (only it: the queue is
# not); the table follows new jobs; a group whose jobs start shows its
# starts/s; a sharded queue's table is its shards' groups merged, and a group paused from it is paused on its own shard; a
# queue without groups has no table.
# Screenshot, checked for what it must show: <build>/artifacts/groups-queue.png.
# Skipped (with the reason) only where chromium or npm cannot be installed.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test dg dashboard-groups worker browser

enq() { # enq QUEUE GROUP N
    for i in $(seq "$3"); do
        "$RJQ" --prefix dg enqueue "$1" "$2-$i" --group "$2" >/dev/null || { echo "FAIL: enqueue"; exit 1; }
    done
}
enq tenants acme 7; enq tenants globex 3; enq tenants initech 1
"$RJQ" --prefix dg group tenants globex --concurrency 2 >/dev/null || { echo "FAIL: rjq group"; exit 1; }
# acme: a rate limit (50 starts a second) and a bound (500 ready jobs);
# initech: 3 starts per 250 ms (the page shows 50/1s, 500, 3/250ms)
"$RJQ" --prefix dg group tenants acme --rate 50 --max-waiting 500 >/dev/null || { echo "FAIL: rjq group"; exit 1; }
"$RJQ" --prefix dg group tenants initech --rate 3/250 >/dev/null || { echo "FAIL: rjq group"; exit 1; }
"$RJQ" --prefix dg enqueue plain x >/dev/null || { echo "FAIL: enqueue plain"; exit 1; }
"$RJQ" --prefix dg shards sharded 2 >/dev/null || { echo "FAIL: rjq shards"; exit 1; }
enq sharded s1 4; enq sharded s2 3; enq sharded s3 2; enq sharded s4 1
"$RJQ" --prefix dg group sharded s3 --rate 2/60000 --max-waiting 9 >/dev/null || { echo "FAIL: rjq group"; exit 1; }
start_serve rw
# runs: a worker serves it (its group busy, one job at a time: the page's
# starts/s of it; groups.mjs enqueues the jobs)
"$RJQ" --prefix dg group runs busy --concurrency 1 >/dev/null || { echo "FAIL: rjq group"; exit 1; }
"$WORKER" -r "$redis_url" -P dg runs >"$DIR/worker.log" 2>&1 &
PIDS+=($!)
cp "$SRC/tests/dashboard/groups.mjs" "$PW/groups.mjs" # resolves playwright-core from $PW
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART RJQ="$RJQ --prefix dg" timeout 120 node "$PW/groups.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/rw.err"; }
stop_serve_clean rw || RC=1
exit $RC
