#!/usr/bin/env bash
# GET /v1/queues/{q}/history of rjq serve (README "History"): the stored
# per-minute figures of a queue, written by the producers and workers that
# ran its jobs (here the --demo pool, and the rjq tool's enqueue): exact
# counts, run times in the histogram, the same answer after serve
# restarts (another process reads the same buckets), the 24h and 30d
# ranges' lengths, 400 for a bad range, 405 for another method.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test ph serve-history
# sums BODY: enqueued completed failed run_count of every point
sums() {
    "$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
p = d["points"]
print(sum(x["enqueued"] for x in p), sum(x["completed"] for x in p),
      sum(x["failed"] for x in p), sum(x["run_count"] for x in p))
' "$1"
}

start_serve main --demo --queues 'demo'
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/demo/pool?size=4&latency_ms=20&fail_pct=0&hang_pct=0"
[ "$CODE" = 200 ] || fail "pool: $CODE $BODY"
get -X POST "$BASE/v1/demo/enqueue?kind=report&n=30"
[ "$CODE" = 200 ] || fail "enqueue: $CODE $BODY"
"$RJQ" --prefix ph enqueue demo '{"kind":"cli","n":1}' >/dev/null || fail "rjq enqueue"

# the flushes land (every second while there is activity): wait for them
CHECKS=$((CHECKS + 1))
got=""
for _ in $(seq 300); do
    get "$BASE/v1/queues/demo/history?range=1h"
    [ "$CODE" = 200 ] && got=$(sums "$BODY")
    [ "$got" = "31 31 0 31" ] && break
    sleep 0.1
done
[ "$got" = "31 31 0 31" ] || fail "history counts: '$got' (want 31 enqueued, 31 completed, 0 failed, 31 runs): $BODY"
CHECKS=$((CHECKS + 1))
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["queue"] == "demo" and d["range"] == "1h" and d["step_ms"] == 60000, d
p = d["points"]
assert len(p) == 60, len(p)
assert all(p[i + 1]["t"] - p[i]["t"] == 60000 for i in range(59)), "not a minute apart"
assert p[-1]["t"] % 60000 == 0
assert len(d["bounds"]) == 22 and d["bounds"][0] == 0.001 and d["bounds"][-1] is None, d["bounds"]
busy = [x for x in p if x["run_count"]]
# the pool runs each job 10 to 30 ms (latency_ms/2 + up to latency_ms):
# every run is at least 10 ms, so the mean is too (9 with whole-millisecond
# rounding), and the p50, read from the doubling buckets (8-16 ms,
# 16-32 ms), lies between 8 ms and a second
assert busy and all(x["run_sum_ms"] >= 9 * x["run_count"] for x in busy), busy
assert all(0.008 <= x["run_p50"] <= 1.0 for x in busy), busy
assert all(x["run_p99"] >= x["run_p50"] for x in busy), busy
quiet = [x for x in p if not x["run_count"]]
assert all(x["run_p50"] is None and x["wait_p50"] is None for x in quiet)
assert "run" not in p[0], "buckets only with ?buckets=1"
' "$BODY" || fail "history shape: $BODY"

# with the buckets
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/demo/history?range=1h&buckets=1"
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
p = d["points"]
assert all(len(x["run"]) == 22 and len(x["wait"]) == 22 for x in p)
assert sum(sum(x["run"]) for x in p) == 31, p
' "$BODY" || fail "buckets: $BODY"

# another serve process (a restart) reads the same figures from Redis
kill "$SPID"; wait "$SPID" 2>/dev/null
start_serve again --queues 'demo'
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/demo/history?range=1h"
[ "$CODE" = 200 ] && [ "$(sums "$BODY")" = "31 31 0 31" ] || fail "after a restart: $CODE $BODY"

CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/demo/history?range=24h"
[ "$CODE" = 200 ] && "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["range"] == "24h" and len(d["points"]) == 1440 and d["step_ms"] == 60000
assert sum(x["completed"] for x in d["points"]) == 31
' "$DIR/b" || fail "24h: $CODE"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/demo/history?range=30d"
[ "$CODE" = 200 ] && "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["range"] == "30d" and len(d["points"]) == 720 and d["step_ms"] == 3600000
assert all(x["t"] % 3600000 == 0 for x in d["points"])
assert sum(x["completed"] for x in d["points"]) == 31  # the hours were written by the same flushes
' "$DIR/b" || fail "30d: $CODE"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/demo/history?range=2h"
[ "$CODE" = 400 ] || fail "a bad range: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/demo/history?buckets=2"
[ "$CODE" = 400 ] || fail "a bad buckets: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/demo/history"
[ "$CODE" = 405 ] || fail "POST: $CODE $BODY"

for f in "$DIR"/*.err; do
    if grep -qE "AddressSanitizer|runtime error|LeakSanitizer" "$f"; then fail "sanitizer report in $f"; cat "$f"; fi
done
echo "tool_serve_history: $((CHECKS - FAILURES))/$CHECKS checks passed"
[ "$FAILURES" = 0 ]
