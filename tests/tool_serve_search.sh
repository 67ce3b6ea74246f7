#!/usr/bin/env bash
# rjq serve's payload search (tools/serve/search.c): POST
# /v1/queues/{q}/search starts a scan in bounded steps (one HSCAN of about
# `count` payloads each), GET .../search/{id} gives its progress (scanned,
# total, steps) and the matches so far (?from= pages them), DELETE cancels
# it (no step counts after), the states asked for filter the matches, max
# caps them, bad input gets a clear 400, a read-only server searches too.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test search serve-search
# until_over SID: GET the search until it is no longer running (each GET
# answers at once: the steps go on in the server between them)
until_over() {
    for _ in $(seq 1200); do
        get "$BASE/v1/queues/s/search/$1"
        [[ $CODE == 200 && $BODY != *'"state":"running"'* ]] && return 0
        sleep 0.05
    done
    fail "search $1 never ended: $CODE $BODY"
}

# 2000 ready jobs (every 100th holds "needle"), 500 delayed (every 50th),
# one cancelled that holds it; the server numbers the anonymous ones 1, 2, ...
for i in $(seq 0 1999); do
    if [ $((i % 100)) = 7 ]; then echo "{\"n\":$i,\"note\":\"a needle here\"}"; else echo "{\"n\":$i}"; fi
done | "$RJQ" --prefix search enqueue s - >/dev/null || fail "enqueue ready"
for i in $(seq 0 499); do
    if [ $((i % 50)) = 3 ]; then echo "later needle $i"; else echo "later $i"; fi
done | "$RJQ" --prefix search enqueue s - --delay 600000 >/dev/null || fail "enqueue delayed"
"$RJQ" --prefix search enqueue s "cancel me, needle" --id gone >/dev/null || fail "enqueue gone"
"$RJQ" --prefix search cancel s gone >/dev/null || fail "cancel gone"
seq 8 100 2000 >"$DIR/want.ready"
seq 2004 50 2500 >"$DIR/want.delayed"
for id in 8 2004; do # (the numbering assumed)
    [[ $("$RJQ" --prefix search job s $id) == *needle* ]] || fail "job $id: $("$RJQ" --prefix search job s $id)"
done

# a sharded queue of 3 shards: 300 jobs spread over them, 30 hold "needle"
"$RJQ" --prefix search shards sh 3 >/dev/null || fail "rjq shards sh 3"
for i in $(seq 0 299); do
    if [ $((i % 10)) = 0 ]; then echo "sharded needle $i"; else echo "sharded $i"; fi
done | "$RJQ" --prefix search enqueue sh - >/dev/null || fail "enqueue sh"

start_serve main

# bad input: clear 400s, unknown searches 404, wrong methods 405
for q in "" "text=" "text=x&states=sleeping" "text=x&states=ready," "text=x&count=0" \
         "text=x&count=1001" "text=x&max=0" "text=x&max=abc"; do
    CHECKS=$((CHECKS + 1))
    get -X POST "$BASE/v1/queues/s/search?$q"
    [[ $CODE == 400 && $BODY == *'"error":'* ]] || fail "POST search?$q: $CODE $BODY"
done
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/s/search?text=$(printf 'x%.0s' $(seq 1025))"
[[ $CODE == 400 && $BODY == *'1 to 1024 bytes'* ]] || fail "text too long: $CODE $BODY"
CHECKS=$((CHECKS + 1)) # the states it takes, named: waiting (for dependencies) too
get -X POST "$BASE/v1/queues/s/search?text=x&states=sleeping"
[[ $BODY == *'list of ready, delayed, waiting, active, dead, cancelled, completed'* ]] || fail "states named: $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/s/search/999"
[[ $CODE == 404 && $BODY == *'no such search'* ]] || fail "unknown search: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/s/search/abc"
[ "$CODE" = 404 ] || fail "search abc: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/s/search"
[ "$CODE" = 405 ] || fail "GET search: $CODE $BODY"

# every state: each match once, the states read, progress to the end in steps
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/s/search?text=needle&count=50"
SID=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["search"])' "$BODY" 2>/dev/null)
[[ $CODE == 202 && -n $SID ]] || fail "POST search: $CODE $BODY"
until_over "$SID"
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
ready = open(sys.argv[2]).read().split(); delayed = open(sys.argv[3]).read().split()
assert d["state"] == "done" and d["text"] == "needle" and not d["truncated"], d
assert d["total"] == 2501 and d["scanned"] >= 2501, d
assert d["steps"] > 2501 // 100, d  # many bounded steps, not one
got = {m["id"]: m["state"] for m in d["matches"]}
assert len(got) == len(d["matches"]) == d["found"] == 31, d
want = {i: "ready" for i in ready}; want.update({i: "delayed" for i in delayed}); want["gone"] = "cancelled"
assert got == want, (sorted(got.items()), sorted(want.items()))
assert d["first_match_ms"] is not None and d["elapsed_ms"] >= d["first_match_ms"], d
' "$BODY" "$DIR/want.ready" "$DIR/want.delayed" || fail "search all: $BODY"
# ?from= pages the matches
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/s/search/$SID?from=30"
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["from"] == 30 and len(d["matches"]) == 1 and d["found"] == 31, d
' "$BODY" || fail "from=30: $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/s/search/$SID?from=-1"
[ "$CODE" = 400 ] || fail "from=-1: $CODE $BODY"

# a sharded queue: its shards one after the other, each match with its shard
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/sh/search?text=needle&count=20"
SID=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["search"])' "$BODY" 2>/dev/null)
[ "$CODE" = 202 ] || fail "POST sharded search: $CODE $BODY"
for _ in $(seq 1200); do
    get "$BASE/v1/queues/sh/search/$SID"
    [[ $CODE == 200 && $BODY != *'"state":"running"'* ]] && break
    sleep 0.05
done
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["state"] == "done" and d["shards"] == 3 and d["total"] == 300 and d["scanned"] >= 300, d
pairs = {(m["id"], m["shard"]) for m in d["matches"]}
assert len(pairs) == d["found"] == 30, d
assert len({m["shard"] for m in d["matches"]}) > 1 and all(0 <= m["shard"] < 3 for m in d["matches"]), d
' "$BODY" || fail "sharded search: $BODY"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/s/search/$SID"
[ "$CODE" = 404 ] || fail "a search named under another queue: $CODE $BODY"

# the states asked for
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/s/search?text=needle&states=delayed,cancelled"
SID=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["search"])' "$BODY" 2>/dev/null)
until_over "$SID"
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
delayed = open(sys.argv[2]).read().split()
assert d["states"] == ["delayed", "cancelled"], d
got = sorted(m["id"] for m in d["matches"])
assert got == sorted(delayed + ["gone"]), (got, d)
' "$BODY" "$DIR/want.delayed" || fail "states=delayed,cancelled: $BODY"

# max: the scan stops past it, and says so
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/s/search?text=needle&max=3&count=10"
SID=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["search"])' "$BODY" 2>/dev/null)
until_over "$SID"
[[ $BODY == *'"state":"done"'* && $BODY == *'"truncated":true'* && $BODY == *'"found":3,'* ]] ||
    fail "max=3: $BODY"

# cancel: a search cancelled while its step is out (Redis stopped, so it
# cannot end first on a loaded machine); no step counts after, not even
# the one answered once Redis goes on
CHECKS=$((CHECKS + 1))
# shellcheck disable=SC2154 # (redis_pid: set by redis_private_start)
kill -STOP "$redis_pid"
get -X POST "$BASE/v1/queues/s/search?text=nothing-has-this&count=1"
SID=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["search"])' "$BODY" 2>/dev/null)
get -X DELETE "$BASE/v1/queues/s/search/$SID"
kill -CONT "$redis_pid"
AT=$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["state"]=="cancelled", d; print(d["scanned"], d["steps"])' "$BODY") ||
    fail "DELETE: $CODE $BODY"
get -X POST "$BASE/v1/queues/s/search?text=needle&count=1000" # another search's whole run: the cancelled one's step is answered
SID2=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["search"])' "$BODY" 2>/dev/null)
until_over "$SID2"
get "$BASE/v1/queues/s/search/$SID"
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1]); scanned, steps = map(int, sys.argv[2].split())
assert d["state"] == "cancelled" and d["scanned"] == scanned and d["steps"] == steps, (d, scanned, steps)
assert d["scanned"] < 2501, d
' "$BODY" "$AT" || fail "after the cancel: $BODY (at the cancel: $AT)"

# field=F: the jobs whose indexed JSON field F has the value, from the index
# (O(matches)); a field not declared, or an index that does not cover every
# job, is scanned for the value instead and the status says why
for i in $(seq 0 49); do echo "{\"customer\":\"c$((i % 5))\",\"n\":$i}"; done |
    "$RJQ" --prefix search enqueue ix - >/dev/null || fail "enqueue ix"
search_ix() { # QUERY: start, wait for the end; BODY is the last status
    get -X POST "$BASE/v1/queues/ix/search?$1"
    SID=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["search"])' "$BODY" 2>/dev/null)
    [ "$CODE" = 202 ] || fail "search ix $1: $CODE $BODY"
    for _ in $(seq 1200); do
        get "$BASE/v1/queues/ix/search/$SID"
        [[ $CODE == 200 && $BODY != *'"state":"running"'* ]] && return 0
        sleep 0.05
    done
    fail "search ix $SID never ended: $CODE $BODY"
}
check_ix() { # WANT_FOUND USED NOTE_PART
    CHECKS=$((CHECKS + 1))
    "$PY" -c '
import json, sys
b = json.loads(sys.argv[1])
ok = b["state"] == "done" and b["found"] == int(sys.argv[2]) and b["index"]["used"] == (sys.argv[3] == "1")
ok = ok and (sys.argv[4] in (b["index"]["note"] or "")) and b["field"] == "customer"
sys.exit(0 if ok else 1)' "$BODY" "$1" "$2" "$3" || fail "index search: want found $1 used $2 note '$3': $BODY"
}
search_ix "text=c3&field=customer"
check_ix 10 0 "not indexed"
"$RJQ" --prefix search index ix customer >/dev/null || fail "rjq index ix customer"
search_ix "text=c3&field=customer&count=3"
check_ix 10 1 ""
[[ $BODY == *'"note":null'* ]] || fail "a search by the index has no note: $BODY"
redis-cli -p "$redis_port" HSET 'search:{ix}:payload' stray '{"customer":"c3"}' >/dev/null
search_ix "text=c3&field=customer"
check_ix 11 0 "covers 50 of 51 jobs"
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/ix/search?text=c3&field=bad%20name"
[ "$CODE" = 400 ] || fail "a bad field: $CODE $BODY"

# a read-only server searches (a search writes nothing) but refuses writes
start_serve ro --read-only
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/s/search?text=needle&states=cancelled"
SID=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["search"])' "$BODY" 2>/dev/null)
[ "$CODE" = 202 ] || fail "read-only search: $CODE $BODY"
until_over "$SID"
[[ $BODY == *'"found":1,'* && $BODY == *'"id":"gone"'* ]] || fail "read-only search result: $BODY"
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/s/pause"
[ "$CODE" = 403 ] || fail "read-only pause: $CODE $BODY"
kill "$SPID"; wait "$SPID"

# the server stops cleanly with a search running (under ASan: no leak, no error report)
start_serve main2
get -X POST "$BASE/v1/queues/s/search?text=nothing-has-this&count=1"
CHECKS=$((CHECKS + 1))
kill "$SPID"
wait "$SPID"; RC=$?
{ [ "$RC" = 0 ] && ! grep -q 'Sanitizer\|runtime error' "$DIR/main.err" "$DIR/main2.err"; } ||
    fail "serve exit $RC: $(grep -A5 Sanitizer "$DIR"/main*.err | head -20)"
CHECKS=$((CHECKS + 1))
kill "${PIDS[0]}"; wait "${PIDS[0]}"; RC=$?
{ [ "$RC" = 0 ] && ! grep -q 'Sanitizer\|runtime error' "$DIR/main.err"; } ||
    fail "serve (main) exit $RC: $(grep -A5 Sanitizer "$DIR/main.err" | head -20)"

[ "$FAILURES" = 0 ] || { echo "$FAILURES of $CHECKS checks failed"; tail -5 "$DIR/main.err"; exit 1; }
echo "ok: $CHECKS checks"
