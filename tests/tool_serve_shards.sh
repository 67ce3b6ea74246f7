#!/usr/bin/env bash
# rjq serve with a sharded queue (README "Sharded queues") on a standalone
# server: one queue to the API, the dashboard's list and /metrics.
#   - GET /v1/queues lists it once ("shards":3), its shards "Q~i-k" not;
#   - GET /v1/queues/Q: stats summed; ?shards=1 adds each shard's stats,
#     name, slot and master; a shard addressed on its own still answers,
#     marked "shard_of";
#   - enqueue (ids: each id on its own shard, anonymous: spread), the
#     merged job list, a job by id, cancel, pause/resume, purge and
#     enqueue-and-wait go through the sharded handle; an anonymous job's id
#     is made by the library (docs/sharding.md 6a): found by it (200); a
#     server-assigned id (all digits) cannot name a job of a sharded queue: 409;
#   - /metrics: queue="Q" once (no series of its shards' names),
#     rjq_queue_shards, run times (the shards' monitors feed the queue's),
#     the shard label only with --metrics-shards
#     (rjq_shard_jobs), promtool check clean (when installed); `rjq metrics`
#     sums a sharded queue named after another;
#   - dependencies: a job of the sharded queue waiting for another queue's,
#     and the reverse, read through the queue (its id's shard);
#   - SIGTERM: exit 0 (under ASan: nothing leaked).
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test ss serve-shards worker
req() { # req METHOD PATH [curl args...]: sets CODE, BODY
    local m=$1 p=$2; shift 2
    CODE=$(curl -s -X "$m" -o "$DIR/b" -w '%{http_code}' "$@" "$BASE$p")
    BODY=$(cat "$DIR/b")
    LAST="$m $p"
}
expect() { # expect CODE [BODY-REGEX]
    check
    if [ "$CODE" != "$1" ]; then fail "$LAST: status $CODE, expected $1 (body: ${BODY:0:300})"; return; fi
    if [ $# -ge 2 ] && ! [[ $BODY =~ $2 ]]; then fail "$LAST: body '${BODY:0:300}' does not match /$2/"; fi
}
json() { "$PY" -c "import json,sys; d=json.loads(sys.argv[1]); print($1)" "$BODY"; }
same() { check; [ "$1" = "$2" ] || fail "$3: '$1', expected '$2'"; }
scrape() { curl -s -o "$DIR/m" "$BASE/metrics"; }

"$RJQ" --prefix ss shards sq 3 >/dev/null || fail "rjq shards sq 3"
"$RJQ" --prefix ss enqueue plain x >/dev/null || fail "enqueue plain"
start_serve main --metrics-shards
MAIN_PID=$SPID

# ---- enqueue through the sharded handle ------------------------------------------------
for id in a b c d e f; do
    req POST "/v1/queues/sq/jobs?id=$id" --data "p-$id"; expect 201 "\"id\":\"$id\""
done
for _ in 1 2 3 4 5 6; do req POST /v1/queues/sq/jobs --data anon; expect 201; done
ANON_ID=$(json 'd["id"]')

# ---- one queue, its shards on request --------------------------------------------------
req GET "/v1/queues/sq?shards=1"; expect 200 '"shards":3'
same "$(json 'd["stats"]["ready"]')" 12 "stats.ready (summed)"
same "$(json 'len(d["shard_stats"])')" 3 "shard_stats entries"
same "$(json 'sum(x["stats"]["ready"] for x in d["shard_stats"])')" 12 "the shards' ready add up"
same "$(json 'all(x["name"].startswith("sq~") and x["master"] for x in d["shard_stats"])')" True \
    "each shard: its name and master"
# anonymous jobs are spread (round robin): no shard left empty
same "$(json 'min(x["stats"]["ready"] for x in d["shard_stats"]) > 0')" True "every shard has jobs"
SHARDS=$(json '" ".join(x["name"] for x in d["shard_stats"])')
SHARD0=${SHARDS%% *}
req GET /v1/queues/sq; expect 200
same "$(json '"shard_stats" in d')" False "no breakdown without ?shards=1"
req GET "/v1/queues/sq?shards=x"; expect 400 'shards must be 0 or 1'

# the list: the sharded queue once (the registry names its shards too)
for _ in $(seq 400); do
    req GET /v1/queues
    [[ $BODY == *'"name":"sq"'* && $BODY == *'"name":"plain"'* && $BODY == *'"stats":{'* ]] &&
        [ "$(json 'all(q["stats"] for q in d["queues"])')" = True ] && break
    sleep 0.05
done
expect 200
same "$(json '[q["name"] for q in d["queues"]]')" "['plain', 'sq']" "the queues listed"
same "$(json '[q["shards"] for q in d["queues"]]')" "[1, 3]" "their shard counts"

# a shard addressed on its own (operators): answered, marked as a shard
req GET "/v1/queues/$SHARD0"; expect 200 '"shard_of":"sq"'
same "$(json 'd["shard"]')" 0 "the shard's index"

# ---- calls on the queue ------------------------------------------------------------------
req GET "/v1/queues/sq/jobs?state=ready&limit=100"; expect 200
same "$(json 'len(d["ids"])')" 12 "the merged ready list"
same "$(json 'sorted(x for x in d["ids"] if len(x) == 1)')" "['a', 'b', 'c', 'd', 'e', 'f']" \
    "the caller ids listed"
same "$(json 'len(set(d["ids"])) == 12 and not any(x.isdigit() for x in d["ids"])')" True \
    "the anonymous jobs' ids: made by the library, none repeated"
req GET /v1/queues/sq/jobs/e; expect 200 '"payload":"p-e"'
req GET "/v1/queues/sq/jobs/$ANON_ID"; expect 200 '"payload":"anon"'
req GET /v1/queues/sq/jobs/42; expect 409 'sharded'
# dependencies: dw of sq waits for px of plain (its list read on its
# shard), pw of plain for e of sq (registered with e's shard: e's
# dependents); the CLI shows dw waiting, through the queue
"$RJQ" --prefix ss enqueue plain held --id px --delay 3600000 >/dev/null || fail "enqueue px"
"$RJQ" --prefix ss enqueue sq w --id dw --after plain:px >/dev/null || fail "enqueue dw --after"
"$RJQ" --prefix ss enqueue plain w --id pw --after sq:e >/dev/null || fail "enqueue pw --after sq:e"
req GET /v1/queues/sq/jobs/dw/dependencies; expect 200
same "$(json '[(x["queue"], x["id"], x["state"], x["counted"]) for x in d["dependencies"]]')" \
    "[('plain', 'px', 'delayed', 'pending')]" "dw's dependencies"
req GET /v1/queues/sq/jobs/e/dependencies; expect 200
same "$(json '([x for x in d["dependencies"]], [(x["queue"], x["id"]) for x in d["dependents"]])')" \
    "([], [('plain', 'pw')])" "e's dependents"
req GET /v1/queues/plain/jobs/pw/dependencies; expect 200
same "$(json '[(x["queue"].startswith("sq~"), x["id"], x["state"]) for x in d["dependencies"]]')" \
    "[(True, 'e', 'ready')]" "pw's dependency: e, named by its shard"
req GET /v1/queues/sq/jobs/42/dependencies; expect 409 'sharded' # (as its job page)
same "$("$RJQ" --prefix ss jobs sq waiting)" dw "rjq jobs sq waiting"
check; "$RJQ" --prefix ss job sq dw | grep -q '^state *waiting' ||
    fail "rjq job sq dw: $("$RJQ" --prefix ss job sq dw 2>&1)"
# an all-digits id of the sharded queue names no shard: the CLI says so and
# how to name the shard (not "this call does not span its shards yet"),
# the dependency as typed, the command's name once
check; msg=$("$RJQ" --prefix ss enqueue plain w --after sq:42 2>&1) && fail "--after sq:42 taken"
[[ $msg == "rjq: enqueue: dependency sq:42 (after's entry 1): queue sq is sharded and 42,"* &&
   $msg == *'sq~<i>-<k> (rjq shards sq lists them)' && $msg != *"does not span"* ]] ||
    fail "--after sq:42: $msg"
check; msg=$("$RJQ" --prefix ss job sq 42 2>&1) && fail "rjq job sq 42 taken"
[[ $msg == "rjq: job: queue sq is sharded: a server-assigned (all-digits) id"* &&
   $msg == *'rjq shards sq'* && $msg != *"does not span"* ]] || fail "rjq job sq 42: $msg"
check; msg=$("$RJQ" --prefix ss batch sq --create 2>&1) && fail "a batch in sq made"
[[ $msg == "rjq: batch: queue sq is split into shards"*"keep the batch in a plain queue"* &&
   $msg != *"does not span"* ]] || fail "rjq batch sq --create: $msg"
req POST /v1/queues/sq/jobs/b/cancel; expect 200 '"cancelled":true'
req POST "/v1/queues/sq/purge?state=cancelled"; expect 200 '"deleted":1'
req POST /v1/queues/sq/pause; expect 200 '"changed":true'
req GET "/v1/queues/sq?shards=1"; expect 200
same "$(json 'd["stats"]["paused"] and all(x["stats"]["paused"] for x in d["shard_stats"])')" True \
    "paused: every shard"
req POST /v1/queues/sq/resume; expect 200 '"changed":true'
req POST "/v1/queues/sq/jobs?id=a" --data again; expect 200 # (an id meets itself: its shard)

# enqueue-and-wait: a worker of the three shards answers (once the server
# monitors the shards: their events are the queue's, for its timings)
for _ in $(seq 400); do
    req GET /v1/queues/sq
    [[ $BODY == *'"monitored":true'* ]] && break
    sleep 0.05
done
expect 200 '"monitored":true'
# shellcheck disable=SC2086 # (the shards' names, one word each)
"$WORKER" -r "$redis_url" -P ss $SHARDS >"$DIR/worker.log" 2>&1 &
PIDS+=($!)
req POST "/v1/queues/sq/jobs?id=w1&wait=60000" --data hello; expect 200 'done:hello'
req POST "/v1/queues/sq/jobs?id=w2&wait=60000" --data fail-now; expect 502 'refused: fail-now'
req GET /v1/queues/sq/jobs/w1; expect 200 '"state":"completed"'

# ---- metrics ---------------------------------------------------------------------------------
for _ in $(seq 400); do # until the stats show the worker's jobs (12 left, w1)
    scrape
    grep -qxF 'rjq_jobs_completed_total{queue="sq"} 12' "$DIR/m" &&
        grep -q '^rjq_shard_jobs_total{queue="sq",shard="2",transition="completed"}' "$DIR/m" &&
        break
    sleep 0.05
done
check; grep -qxF 'rjq_jobs_completed_total{queue="sq"} 12' "$DIR/m" ||
    fail "/metrics: no rjq_jobs_completed_total{queue=\"sq\"} 12: $(grep completed_total "$DIR/m")"
check; grep -qxF 'rjq_queue_shards{queue="sq"} 3' "$DIR/m" || fail "/metrics: no rjq_queue_shards 3"
# run times from the shards' monitors (13 runs: 12 completed, 1 failed for good)
for _ in $(seq 400); do
    grep -qxF 'rjq_job_run_seconds_count{queue="sq"} 13' "$DIR/m" && break
    sleep 0.05
    scrape
done
check; grep -qxF 'rjq_job_run_seconds_count{queue="sq"} 13' "$DIR/m" ||
    fail "/metrics: run times of sq: $(grep 'rjq_job_run_seconds_count' "$DIR/m")"
check; grep -qxF 'rjq_queue_shards{queue="plain"} 1' "$DIR/m" || fail "/metrics: no rjq_queue_shards 1"
check; ! grep -q 'queue="sq~' "$DIR/m" || fail "/metrics names a shard as a queue: $(grep -m3 'queue="sq~' "$DIR/m")"
check; [ "$(grep -c '^rjq_shard_jobs{queue="sq",shard="[0-2]",state="ready"}' "$DIR/m")" = 3 ] ||
    fail "/metrics: not one rjq_shard_jobs ready per shard"
check; ! grep -q 'shard=' <(grep -v '^rjq_shard_' "$DIR/m") || fail "a shard label outside rjq_shard_*"
sum=$(sed -n 's/^rjq_shard_jobs_total{queue="sq",shard="[0-9]*",transition="completed"} //p' "$DIR/m" |
    "$PY" -c 'import sys; print(sum(int(x) for x in sys.stdin))')
same "$sum" 12 "the shards' completed add up"
if command -v promtool >/dev/null; then
    check; promtool check metrics <"$DIR/m" >"$DIR/promtool.out" 2>&1 ||
        fail "promtool: $(cat "$DIR/promtool.out")"
fi
# without --metrics-shards: no shard label at all
start_serve plainmetrics
for _ in $(seq 400); do
    scrape
    grep -qxF 'rjq_queue_shards{queue="sq"} 3' "$DIR/m" && break
    sleep 0.05
done
check; grep -qxF 'rjq_queue_shards{queue="sq"} 3' "$DIR/m" || fail "/metrics (2): no rjq_queue_shards 3"
check; ! grep -q 'shard=' "$DIR/m" || fail "a shard label without --metrics-shards"
check; ! grep -q 'queue="sq~' "$DIR/m" || fail "/metrics (2) names a shard as a queue"
# rjq metrics: the sharded queue summed, also when named after another
"$RJQ" --prefix ss metrics plain sq >"$DIR/cli.m" 2>&1 || fail "rjq metrics: $(cat "$DIR/cli.m")"
check; grep -qxF 'rjq_jobs_completed_total{queue="sq"} 12' "$DIR/cli.m" ||
    fail "rjq metrics plain sq: $(grep 'completed_total' "$DIR/cli.m")"

# SIGTERM while an enqueue waits for its new queue's layout (Redis stopped):
# exit 0 (under ASan: no leak, the waiting request and the handles freed)
BASE=$(sed -n 's/^listening on /http:\/\//p' "$DIR/main.out")
kill -STOP "$redis_pid"
curl -s -o "$DIR/parked.b" -w '%{http_code}' -X POST --data x "$BASE/v1/queues/fresh/jobs" >"$DIR/parked.code" &
CURL=$!
PIDS+=("$CURL")
for _ in $(seq 400); do
    [[ $(curl -s "$BASE/v1/server") == *'"waiting":1,'* ]] && break
    sleep 0.05
done
check; [[ $(curl -s "$BASE/v1/server") == *'"waiting":1,'* ]] || fail "the enqueue to a new queue is not waiting"
kill -TERM "$MAIN_PID"; wait "$MAIN_PID"; RC=$?
kill -CONT "$redis_pid"
same "$RC" 0 "rjq serve's exit status on SIGTERM (stderr: $(tail -5 "$DIR/main.err"))"
wait "$CURL"
check; [[ $(cat "$DIR/parked.code") =~ ^(503|000)$ ]] ||
    fail "the waiting enqueue at shutdown: $(cat "$DIR/parked.code") $(cat "$DIR/parked.b")"

echo "$CHECKS checks, $FAILURES failures"
[ "$FAILURES" = 0 ]
