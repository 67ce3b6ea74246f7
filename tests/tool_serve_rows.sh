#!/usr/bin/env bash
# GET /v1/queues/{q}/jobs of rjq serve gives rows, not only ids: each job's
# state, kind (a JSON object's "kind"/"type"/"name") or payload preview
# (compact JSON or text, at most 80 characters, UTF-8 safe; null for binary
# bytes), attempts, times, last error (capped) and worker (host and pid of
# a listed process); ids only with rows=0 or a page longer than 100. And
# GET /v1/queues/{q}/jobs/{id} gives the job's worker.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test rows serve-rows worker
post() { get -X POST "$BASE/v1/queues/r/jobs?$1" --data-binary "$2"; [ "$CODE" = 201 ] || fail "enqueue $1: $CODE $BODY"; }
# wait_for STATE ID: until the job is listed in that state (its event)
wait_for() {
    for _ in $(seq 400); do
        get "$BASE/v1/queues/r/jobs?state=$1&rows=0"
        [[ $BODY == *"\"$2\""* ]] && return 0
        sleep 0.05
    done
    fail "$2 never $1: $BODY"
}

start_serve main
"$WORKER" -r "$redis_url" -P rows r >"$DIR/worker.log" 2>&1 &
WPID=$!
PIDS+=("$WPID")

LONG_ERR="fail-$(printf 'e%.0s' $(seq 300))"
post "id=k1" '{"kind":"email","to":"a@example.com"}'
post "id=k3&attempts=1" "$LONG_ERR"
post "id=k4" 'sleep:600000:z'
post "id=k2&delay=600000" '{"customer":12,"items":["aaaaaaaaaaaaaaaa","bbbbbbbbbbbbbbbbbbbb","cccccccccccccccccccccc","dddddddddddd"]}'
post "id=k5&delay=600000" $'hello\nworld'
printf '\xff\xfe\x00\x01binary' >"$DIR/bin"
get -X POST "$BASE/v1/queues/r/jobs?id=k6&delay=600000" --data-binary @"$DIR/bin"
[ "$CODE" = 201 ] || fail "enqueue k6: $CODE $BODY"
post "id=k7&delay=600000" "$(printf 'é%.0s' $(seq 100))"
post "id=k8&delay=600000" '{"type":"resize","w":3}'
wait_for completed k1
wait_for dead k3
wait_for active k4

CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=completed"
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1]); pid = int(sys.argv[2]); host = sys.argv[3]
assert d["ids"] == ["k1"], d
[j] = d["jobs"]
assert j["id"] == "k1" and j["state"] == "completed" and j["kind"] == "email", j
assert j["attempts"] == 1 and j["max_attempts"] >= 1, j
assert 0 < j["enqueued_ms"] <= j["started_ms"] <= j["ended_ms"], j
assert j["error"] is None, j
w = j["worker"]
assert w["pid"] == pid and w["host"] == host and w["client"], j
' "$BODY" "$WPID" "$(hostname)" || fail "completed rows: $BODY"

CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=dead"
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
[j] = d["jobs"]
assert j["state"] == "dead" and j["kind"] is None and j["attempts"] == 1 and j["max_attempts"] == 1, j
assert j["preview"].startswith("fail-eee") and len(j["preview"]) == 81 and j["preview"][-1] == "\u2026", j
assert j["error"].startswith("refused: fail-eee") and len(j["error"]) == 201 and j["error"][-1] == "\u2026", j
assert j["ended_ms"] and j["worker"]["pid"] == int(sys.argv[2]), j
' "$BODY" "$WPID" || fail "dead rows: $BODY"

CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=active"
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
[j] = d["jobs"]
assert j["id"] == "k4" and j["state"] == "active" and j["preview"] == "sleep:600000:z", j
assert j["started_ms"] and j["ended_ms"] is None and j["worker"]["pid"] == int(sys.argv[2]), j
' "$BODY" "$WPID" || fail "active rows: $BODY"

CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=delayed"
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
rows = {j["id"]: j for j in d["jobs"]}
assert sorted(rows) == ["k2", "k5", "k6", "k7", "k8"], d
p = rows["k2"]["preview"]
assert rows["k2"]["kind"] is None and p.startswith("{\"customer\":12,\"items\":[") and len(p) == 81 and p[-1] == "\u2026", p
assert rows["k5"]["preview"] == "hello world", rows["k5"]
assert rows["k6"]["preview"] is None and rows["k6"]["payload_bytes"] == 10, rows["k6"]
assert rows["k7"]["preview"] == "\u00e9" * 80 + "\u2026", rows["k7"]
assert rows["k8"]["kind"] == "resize", rows["k8"]
for j in rows.values():
    assert j["state"] == "delayed" and j["attempts"] == 0 and j["started_ms"] is None and j["worker"] is None, j
' "$BODY" || fail "delayed rows: $BODY"

# one job: its worker too
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs/k1"
"$PY" -c '
import json, sys
j = json.loads(sys.argv[1])
assert j["state"] == "completed" and j["result"] and j["ended_ms"], j
assert j["worker"]["pid"] == int(sys.argv[2]) and j["worker"]["host"] == sys.argv[3], j
' "$BODY" "$WPID" "$(hostname)" || fail "job k1: $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs/k5"
[[ $CODE == 200 && $BODY == *'"worker":null'* ]] || fail "job k5: $CODE $BODY"

# ids only: rows=0, or a page longer than rows are read for
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=delayed&rows=0"
[[ $CODE == 200 && $BODY == *'"ids":["'* && $BODY != *'"jobs"'* ]] || fail "rows=0: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=delayed&limit=101"
[[ $CODE == 200 && $BODY == *'"ids":["'* && $BODY != *'"jobs"'* ]] || fail "limit=101: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=delayed&rows=2"
[ "$CODE" = 400 ] || fail "rows=2: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=ready"
[[ $CODE == 200 && $BODY == *'"ids":[],"jobs":[]'* || $BODY == *'"jobs":[],'* ]] || fail "empty page: $CODE $BODY"

# attempt history: the dead job's one failed attempt, the completed job's
# own, each with its worker
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs/k3"
B3=$BODY
get "$BASE/v1/queues/r/jobs/k1"
"$PY" -c '
import json, sys
d, c = json.loads(sys.argv[1]), json.loads(sys.argv[2]); pid = int(sys.argv[3])
[a] = d["attempts_history"]
assert a["outcome"] == "failed" and 0 < a["started_ms"] <= a["ended_ms"] and a["worker"]["pid"] == pid, d
[b] = c["attempts_history"]
assert b["outcome"] == "completed" and b["started_ms"] == c["started_ms"] and b["ended_ms"] == c["ended_ms"], c
assert b["worker"]["pid"] == pid and "token" not in b, c
' "$B3" "$BODY" "$WPID" || fail "attempts_history: $B3 / $BODY"

# by cursor (rjq_queue_list_jobs_after): after= empty is the first page,
# "next" the next page's cursor, null at the end; rows or ids only
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=delayed&after=&limit=3"
B1=$BODY
get "$BASE/v1/queues/r/jobs?state=delayed&limit=3&rows=0&after=$("$PY" -c 'import json, sys, urllib.parse; print(urllib.parse.quote(json.loads(sys.argv[1])["next"], safe=""))' "$B1")"
"$PY" -c '
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert len(a["ids"]) == 3 and len(a["jobs"]) == 3 and a["next"], a
assert len(b["ids"]) == 2 and "jobs" not in b and b["next"] is None, b
assert sorted(a["ids"] + b["ids"]) == ["k2", "k5", "k6", "k7", "k8"], (a, b)
' "$B1" "$BODY" || fail "cursor pages: $B1 / $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=delayed&after=bogus"
[ "$CODE" = 400 ] || fail "a bad cursor: $CODE $BODY"

# run now: a delayed job made ready at once (rjq_queue_promote); the worker
# then takes it; anything not delayed is refused with 409, an unknown id 404
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/r/jobs/k5/run-now"
[[ $CODE == 200 && $BODY == *'"promoted":1'* ]] || fail "run-now k5: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=delayed&rows=0"
[[ $BODY != *'"k5"'* && $BODY == *'"k8"'* ]] || fail "k5 still delayed: $BODY"
wait_for completed k5
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/r/jobs/k5/run-now"
[[ $CODE == 409 && $BODY == *'not delayed'* ]] || fail "run-now of a finished job: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/r/jobs/nope/run-now"
[ "$CODE" = 404 ] || fail "run-now of no job: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs/k8/run-now"
[ "$CODE" = 405 ] || fail "GET run-now: $CODE $BODY"

# bulk run now (the dashboard's delayed list): one request, each id's outcome
# in the order given; a body that is not 1 to 100 ids is a 400
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/r/run-now" --data-binary '{"ids":["k8","k5","nope","k7"]}'
[[ $CODE == 200 && $BODY == *'"ran":2'* ]] &&
"$PY" -c '
import json, sys
r = json.loads(sys.argv[1])["results"]
assert r == [{"id": "k8", "result": "ran"}, {"id": "k5", "result": "not delayed"},
             {"id": "nope", "result": "not found"}, {"id": "k7", "result": "ran"}], r
' "$BODY" || fail "bulk run-now: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/jobs?state=delayed&rows=0"
[[ $BODY != *'"k8"'* && $BODY != *'"k7"'* ]] || fail "k7, k8 still delayed: $BODY"
for body in '' '[]' '{"ids":[]}' '{"ids":"k1"}' '{"ids":[7]}' '{"ids":[""]}' \
            "{\"ids\":[$(seq -f '"j%g"' -s, 101)]}"; do
    CHECKS=$((CHECKS + 1))
    get -X POST "$BASE/v1/queues/r/run-now" --data-binary "$body"
    [ "$CODE" = 400 ] || fail "bulk run-now of ${body:0:20}: $CODE $BODY"
done
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/r/run-now"
[ "$CODE" = 405 ] || fail "GET bulk run-now: $CODE $BODY"

# the server stops cleanly (under ASan: no leak, no error report)
CHECKS=$((CHECKS + 1))
kill "$SPID"
wait "$SPID"; RC=$?
{ [ "$RC" = 0 ] && ! grep -q 'Sanitizer\|runtime error' "$DIR/main.err"; } || fail "serve exit $RC: $(grep -A5 Sanitizer "$DIR/main.err" | head -20)"

[ "$FAILURES" = 0 ] || { echo "$FAILURES of $CHECKS checks failed"; tail -5 "$DIR/main.err"; exit 1; }
echo "ok: $CHECKS checks"
