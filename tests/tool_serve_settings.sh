#!/usr/bin/env bash
# GET /v1/queues/{q}/settings of rjq serve: the queue's pause state, its
# limits, the bound (--max-waiting), its schedules with their next fire
# times (null until a scheduler computed one) and its dedup reservations
# (ids kept reserved past their records, and when the next one is let
# go: a job enqueued with --dedup, cancelled and deleted); 404 for a queue never
# written to, 405 for another method; and GET /v1/server's redis_nodes
# (each master's version, role, clients and memory).
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test ps serve-settings

start_serve main --queues 's*' --max-waiting 500
R="$RJQ --prefix ps"
$R schedule s1 nightly --cron '0 3 * * *' >/dev/null || fail "schedule nightly"
$R schedule s1 tick --every 60000 --payload t >/dev/null || fail "schedule tick"
$R limit s1 --concurrency 4 --rate 10/2000 --create >/dev/null || fail "limit"
$R pause s1 --create >/dev/null || fail "pause"

CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/s1/settings"
[ "$CODE" = 200 ] && "$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["queue"] == "s1" and d["paused"] is True, d
assert d["limits"] == {"concurrency": 4, "rate": 10, "rate_window_ms": 2000}, d
assert d["max_waiting"] == 500, d
names = [x["name"] for x in d["schedules"]]
assert names == ["nightly", "tick"], d
assert d["schedules"][0]["spec"].startswith("cron 0 3 * * *"), d
assert d["schedules"][1]["spec"] == "every 60000", d
assert all(x["next_ms"] is None for x in d["schedules"]), d  # no scheduler ran
assert d["dedup"] == {"reserved": 0, "next_release_ms": None}, d
' "$BODY" || fail "settings: $CODE $BODY"

# dedup: a job whose id stays reserved 10 minutes after its record went
$R enqueue s1 x --id kept --dedup 600000 >/dev/null || fail "enqueue --dedup"
$R cancel s1 kept >/dev/null || fail "cancel"
before_ms=$(($(date +%s%3N)))
$R delete s1 kept >/dev/null || fail "delete"
CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/s1/settings"
[ "$CODE" = 200 ] && "$PY" -c '
import json, sys
d = json.loads(sys.argv[1])["dedup"]
at = int(sys.argv[2])
assert d["reserved"] == 1, d
# the cancel time + 10 minutes (server clock; this machine is the server)
assert at + 600000 - 60000 <= d["next_release_ms"] <= at + 600000 + 60000, (d, at)
' "$BODY" "$before_ms" || fail "dedup in settings: $CODE $BODY"
$R stats s1 >"$DIR/stats.out" || fail "rjq stats"
CHECKS=$((CHECKS + 1))
grep -qx "dedup_reserved 1" "$DIR/stats.out" || fail "rjq stats: no dedup_reserved 1: $(cat "$DIR/stats.out")"

# a scheduler computes the next fire times
$R scheduler s1 >"$DIR/sched.out" 2>&1 &
PIDS+=($!)
CHECKS=$((CHECKS + 1))
for _ in $(seq 200); do
    get "$BASE/v1/queues/s1/settings"
    [[ $BODY != *'"next_ms":null'* ]] && break
    sleep 0.05
done
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
assert all(isinstance(x["next_ms"], int) and x["next_ms"] > 0 for x in d["schedules"]), d
' "$BODY" || fail "no next fire times: $BODY"

CHECKS=$((CHECKS + 1))
get "$BASE/v1/queues/snever/settings"
[ "$CODE" = 404 ] || fail "a queue never written to: $CODE $BODY"
CHECKS=$((CHECKS + 1))
get -X POST "$BASE/v1/queues/s1/settings"
[ "$CODE" = 405 ] || fail "POST settings: $CODE $BODY"

# GET /v1/server: each Redis master's version, role, clients and memory (read every 2 s)
CHECKS=$((CHECKS + 1))
for _ in $(seq 200); do
    get "$BASE/v1/server"
    [[ $BODY == *'"redis_nodes":['* ]] && break
    sleep 0.05
done
"$PY" -c '
import json, sys
n = json.loads(sys.argv[1])["redis_nodes"]
assert len(n) == 1 and n[0]["ok"] is True and n[0]["address"].endswith(":" + sys.argv[2]), n
assert n[0]["role"] == "master" and n[0]["version"].count(".") == 2, n
assert isinstance(n[0]["clients"], int) and n[0]["clients"] >= 2, n  # (serve has two connections)
assert isinstance(n[0]["used_memory"], int) and n[0]["used_memory"] > 0, n
' "$BODY" "$redis_port" || fail "redis_nodes: $BODY"

echo "$CHECKS checks, $FAILURES failures"
[ "$FAILURES" = 0 ]
