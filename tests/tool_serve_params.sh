#!/usr/bin/env bash
# rjq serve refuses a query parameter its route does not take (400, JSON
# {"error", "parameter", "takes"}), on every route, before anything is
# read or written: a parameter a client misspelt or thought was taken
# (?group= before it was) is never silently dropped. ?access_token= is
# taken everywhere. POST /v1/queues/{q}/jobs takes ?group= (the job's
# group; not with wait or after; a bad name refused with nothing written).
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test pp serve-params redis-cli

start_serve main --demo --queues 'pq,demo'
# the queue's keys (but those that come and go by themselves: the monitor's
# flag, the sweep guard, the history the producer flushes a second later)
keys() {
    redis-cli -p "$redis_port" --scan --pattern 'pp:{pq}:*' | grep -vE ':(monitored|sweep|hist:[mh])$' |
        sort
}

# what the routes below need: a queue with job j1, batch b1, a search
get -X POST "$BASE/v1/queues/pq/jobs?id=j1" --data hello
[ "$CODE" = 201 ] || { fail "enqueue j1: $CODE $BODY"; exit 1; }
"$RJQ" --prefix pp batch pq --create --id b1 >/dev/null || { fail "batch b1"; exit 1; }
get -X POST "$BASE/v1/queues/pq/search?text=hello"
[ "$CODE" = 202 ] || { fail "search: $CODE $BODY"; exit 1; }
SID=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["search"])' "$BODY")

# each route: METHOD PATH and the parameters it takes (in that order); the
# server's table of them is tools/serve/routes.def (serve_params_documented
# checks this list is that table's)
ROUTES=(
    "GET /healthz|"
    "GET /metrics|"
    "GET /v1/server|"
    "GET /v1/processes|offset limit"
    "GET /v1/events|queues jobs processes last_event_id"
    "GET /v1/queues|limit after"
    "GET /v1/queues/pq|shards"
    "POST /v1/queues/pq/jobs|id delay priority attempts timeout dedup wait after after_policy group"
    "GET /v1/queues/pq/jobs|state offset limit rows after"
    "GET /v1/queues/pq/batches|state limit after"
    "GET /v1/queues/pq/batches/b1|"
    "DELETE /v1/queues/pq/batches/b1|force"
    "GET /v1/queues/pq/history|range buckets"
    "GET /v1/queues/pq/settings|"
    "POST /v1/queues/pq/run-now|"
    "POST /v1/queues/pq/pause|"
    "POST /v1/queues/pq/resume|"
    "POST /v1/queues/pq/reclaim|"
    "POST /v1/queues/pq/replay|limit"
    "POST /v1/queues/pq/purge|state"
    "GET /v1/queues/pq/jobs/j1|"
    "DELETE /v1/queues/pq/jobs/j1|"
    "GET /v1/queues/pq/jobs/j1/dependencies|"
    "POST /v1/queues/pq/jobs/j1/run-now|"
    "POST /v1/queues/pq/jobs/j1/cancel|"
    "POST /v1/queues/pq/jobs/j1/replay|"
    "GET /v1/queues/pq/groups|offset limit"
    "GET /v1/queues/pq/groups/g1|"
    "POST /v1/queues/pq/groups/g1/pause|"
    "POST /v1/queues/pq/groups/g1/resume|"
    "POST /v1/queues/pq/search|text states field max count"
    "GET /v1/queues/pq/search/$SID|from"
    "DELETE /v1/queues/pq/search/$SID|"
    "GET /v1/demo|"
    "POST /v1/demo/enqueue|n kind"
    "POST /v1/demo/pool|size latency_ms fail_pct hang_pct"
    "POST /v1/demo/reclaim|"
)
before=$(keys)
for r in "${ROUTES[@]}"; do
    route=${r%%|*} takes=${r#*|}
    m=${route%% *} p=${route#* }
    check
    get -X "$m" "$BASE$p?bogus=1&access_token=x"
    "$PY" - "$CODE" "$BODY" "$takes" <<'PY' || fail "$route?bogus=1: $CODE $BODY"
import json, sys
code, body, takes = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3].split()
assert code == '400', code
assert body['parameter'] == 'bogus', body
assert body['takes'] == takes, (body['takes'], takes)
assert "unknown query parameter 'bogus'" in body['error'], body['error']
assert all(t in body['error'] for t in takes), body['error']
PY
done
check
[ "$(keys)" = "$before" ] || fail "refused requests wrote to Redis: $(diff <(echo "$before") <(keys))"
check
get "$BASE/v1/queues/pq/jobs/j1"
[[ $CODE == 200 && $BODY == *'"state":"ready"'* ]] || fail "j1 changed: $CODE $BODY"
check
get "$BASE/v1/queues/pq"
[[ $CODE == 200 && $BODY == *'"paused":false'* ]] || fail "pq changed: $CODE $BODY"

# the parameters a route takes still work, access_token with them
check
get "$BASE/v1/queues/pq/jobs?state=ready&limit=5&access_token=x"
[[ $CODE == 200 && $BODY == *'"j1"'* ]] || fail "jobs?state=ready: $CODE $BODY"
# a name that is no UTF-8, and one too long to quote whole: still JSON, named
# (evhttp decodes no %XX in a name: these bytes come raw)
check
get -X GET "$BASE/v1/queues/pq?sh$(printf '\xff')ards=1"
"$PY" -c 'import json,sys; d=json.loads(sys.argv[2]); assert sys.argv[1] == "400" and d["takes"] == ["shards"] and d["parameter"] == {"base64": "c2j/YXJkcw=="}, d' \
    "$CODE" "$BODY" || fail "a name not UTF-8: $CODE $BODY"
check
long=a$(printf 'é%.0s' $(seq 80)) # (a, then 80 é: cut at 100 bytes inside one)
get "$BASE/v1/queues/pq?$long=1"
"$PY" -c '
import json, sys
d = json.loads(sys.argv[2])
assert sys.argv[1] == "400" and d["parameter"] == sys.argv[3], d
assert d["error"] == "unknown query parameter: this route takes shards", d' \
    "$CODE" "$BODY" "$long" || fail "a long name: $CODE $BODY"

# ?group= on an enqueue: the job waits in its group
check
get -X POST "$BASE/v1/queues/pq/jobs?id=gj&group=tenant-1" --data x
[ "$CODE" = 201 ] || fail "enqueue with group: $CODE $BODY"
check
get "$BASE/v1/queues/pq/groups/tenant-1"
[[ $CODE == 200 && $BODY == *'"depth":1'* ]] || fail "the job is not in its group: $CODE $BODY"
before=$(keys)
for bad in "group=a%20b" "group=" "group=$(printf 'g%.0s' $(seq 300))" "group=g&wait=100" \
           "group=g&after=pq:j1"; do
    check
    get -X POST "$BASE/v1/queues/pq/jobs?$bad" --data x
    [[ $CODE == 400 && $BODY == *group* ]] || fail "?$bad: $CODE $BODY"
done
check
[ "$(keys)" = "$before" ] || fail "refused group enqueues wrote to Redis: $(diff <(echo "$before") <(keys))"

stop_serve_clean main || fail "serve did not stop cleanly"
echo "tool_serve_params: $((CHECKS - FAILURES))/$CHECKS checks passed"
[ "$FAILURES" = 0 ]
