#!/usr/bin/env bash
# rjq serve and job groups (README "Groups"):
#   - GET /v1/queues/{q}/groups: the groups with jobs, deepest first, each
#     with its ready and running jobs, limits (concurrency, weight, rate and
#     its window, bound: null when none) and pause; ?offset= &limit=;
#     /groups/{g}: one group (zeros when it has none); a bad name is 400;
#   - POST /v1/queues/{q}/groups/{g}/pause, /resume pause that group only
#     (no other group, nor the queue); refused (403) by --read-only;
#   - /metrics: rjq_queue_groups{queue} and, for the --metrics-groups K
#     busiest groups only (a bounded label set), rjq_group_jobs{queue,group,
#     state}, rjq_group_started_total{queue,group} (a counter) and
#     rjq_group_paused{queue,group}; promtool finds nothing to
#     say; --metrics-groups 0 writes no group series;
#   - a sharded queue (groups on both shards): listed merged by depth, each
#     group once (offset + limit above 1000 is 400), a group paused from
#     serve on its own shard only, its busiest groups in /metrics under the
#     queue's name.
# Skipped (77) when promtool or serve is missing.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
command -v promtool >/dev/null || {
    echo "SKIP: promtool is missing (Debian package prometheus: scripts/install-deps.sh)"; exit 77; }
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test sg serve-groups worker
has() { check; grep -qxF "$1" "$DIR/m" || fail "no line '$1' in /metrics"; }
scrape() { curl -s -o "$DIR/m" "$BASE/metrics"; }
# json EXPR: evaluate a Python expression over the last BODY as d
json() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$DIR/b" "$1"; }

# 5 groups of gq: big 6 ready jobs, g1 4, g2 3, g3 2, g4 1; plain has none
enq() { # enq QUEUE GROUP N
    for i in $(seq "$3"); do
        "$RJQ" --prefix sg enqueue "$1" "job-$2-$i" --group "$2" >/dev/null || fail "enqueue $2"
    done
}
enq gq big 6; enq gq g1 4; enq gq g2 3; enq gq g3 2; enq gq g4 1
"$RJQ" --prefix sg enqueue plain x >/dev/null || fail "enqueue plain"
"$RJQ" --prefix sg group gq g1 --concurrency 2 >/dev/null || fail "rjq group --concurrency"
# g2: a rate limit (50 starts a second) and a bound (100 ready jobs); g3:
# a rate over a window of 250 ms, no bound
"$RJQ" --prefix sg group gq g2 --rate 50 --max-waiting 100 >/dev/null || fail "rjq group --rate --max-waiting"
"$RJQ" --prefix sg group gq g3 --rate 7/250 >/dev/null || fail "rjq group --rate N/MS"
# gd: the defaults of every group (a rate of 20 per 500 ms, a bound of
# 30), which d2's own bound (5) overrides: each listed with those in effect
"$RJQ" --prefix sg group gd '*' --rate 20/500 --max-waiting 30 >/dev/null || fail "rjq group gd '*'"
"$RJQ" --prefix sg group gd d2 --max-waiting 5 >/dev/null || fail "rjq group gd d2"
enq gd d1 2; enq gd d2 1
# sh: a sharded queue (2 shards), each group on one shard (crc16(group) mod
# 2): s1 and s3 on sh~0-0, s2 and s4 on sh~1-0 (checked below)
"$RJQ" --prefix sg shards sh 2 >/dev/null || fail "rjq shards"
enq sh s1 5; enq sh s2 4; enq sh s3 3; enq sh s4 2
"$RJQ" --prefix sg group sh s3 --rate 9/2000 --max-waiting 40 >/dev/null || fail "rjq group sh s3"
shard_groups() { "$RJQ" --prefix sg groups "$1" | tail -n +2 | cut -d' ' -f1 | tr '\n' ' '; }
check; [ "$(shard_groups 'sh~0-0')/$(shard_groups 'sh~1-0')" = "s1 s3 /s2 s4 " ] ||
    fail "sh's groups on both shards: $(shard_groups 'sh~0-0')/$(shard_groups 'sh~1-0')"

start_serve rw --queues 'gq,plain,gw,sh,gd' --metrics-groups 3

# ---- the listing ----------------------------------------------------------------------
get "$BASE/v1/queues/gq/groups"
check; [ "$CODE" = 200 ] || fail "GET groups: $CODE $BODY"
check; [ "$(json '(d["queue"], d["total"], d["offset"], [(g["name"], g["depth"], g["active"]) for g in d["groups"]])')" = \
    "('gq', 5, 0, [('big', 6, 0), ('g1', 4, 0), ('g2', 3, 0), ('g3', 2, 0), ('g4', 1, 0)])" ] ||
    fail "the groups, deepest first: $BODY"
check; [ "$(json '[(g["concurrency"], g["weight"], g["paused"]) for g in d["groups"][:2]]')" = \
    "[(None, 1, False), (2, 1, False)]" ] || fail "settings: big has no limit, g1 2: $BODY"
# each group's fields, exactly; its rate limit and bound (null: none)
check; [ "$(json '[sorted(g) for g in d["groups"]][0]')" = \
    "['active', 'concurrency', 'depth', 'max_waiting', 'name', 'paused', 'rate', 'rate_window_ms', 'started', 'weight']" ] ||
    fail "a group's fields: $BODY"
check; [ "$(json '[(g["name"], g["rate"], g["rate_window_ms"], g["max_waiting"]) for g in d["groups"]]')" = \
    "[('big', None, None, None), ('g1', None, None, None), ('g2', 50, 1000, 100), ('g3', 7, 250, None), ('g4', None, None, None)]" ] ||
    fail "rates and bounds: g2 50/1000 ms bound 100, g3 7/250 ms: $BODY"
get "$BASE/v1/queues/gd/groups"
check; [ "$(json '[(g["name"], g["rate"], g["rate_window_ms"], g["max_waiting"]) for g in d["groups"]]')" = \
    "[('d1', 20, 500, 30), ('d2', 20, 500, 5)]" ] || fail "gd: the defaults in effect, d2's own bound: $BODY"
get "$BASE/v1/queues/gq/groups?offset=1&limit=2"
check; [ "$(json '[g["name"] for g in d["groups"]], d["total"]')" = "(['g1', 'g2'], 5)" ] ||
    fail "offset 1 limit 2: $BODY"
get "$BASE/v1/queues/gq/groups?limit=0"
check; [ "$CODE" = 400 ] || fail "limit=0: $CODE $BODY"
get "$BASE/v1/queues/gq/groups/g3"
check; [ "$(json '(d["name"], d["depth"], d["paused"], d["rate"], d["rate_window_ms"], d["max_waiting"])')" = \
    "('g3', 2, False, 7, 250, None)" ] || fail "one group: $BODY"
get "$BASE/v1/queues/gq/groups/nobody"
check; [ "$CODE $(json '(d["name"], d["depth"], d["active"], d["concurrency"], d["weight"], d["rate"], d["rate_window_ms"], d["max_waiting"], d["started"])')" = \
    "200 ('nobody', 0, 0, None, 1, None, None, None, 0)" ] ||
    fail "a group without jobs: $CODE $BODY"
get "$BASE/v1/queues/gq/groups/bad%20name"
check; [ "$CODE" = 400 ] || fail "a bad group name: $CODE $BODY"
get "$BASE/v1/queues/plain/groups"
check; [ "$CODE $(json '(d["total"], d["groups"])')" = "200 (0, [])" ] || fail "plain has no group: $CODE $BODY"
# a sharded queue: its shards' groups merged by depth, each once
get "$BASE/v1/queues/sh/groups"
check; [ "$CODE $(json '(d["queue"], d["total"], [(g["name"], g["depth"]) for g in d["groups"]], "sharded" in d)')" = \
    "200 ('sh', 4, [('s1', 5), ('s2', 4), ('s3', 3), ('s4', 2)], False)" ] ||
    fail "a sharded queue's groups, merged: $CODE $BODY"
check; [ "$(json '[(g["name"], g["rate"], g["rate_window_ms"], g["max_waiting"]) for g in d["groups"] if g["rate"]]')" = \
    "[('s3', 9, 2000, 40)]" ] || fail "sh: s3's rate and bound, from its shard: $BODY"
get "$BASE/v1/queues/sh/groups?offset=1&limit=2"
check; [ "$(json '[g["name"] for g in d["groups"]], d["total"]')" = "(['s2', 's3'], 4)" ] ||
    fail "sh: offset 1 limit 2: $BODY"
get "$BASE/v1/queues/sh/groups/s4"
check; [ "$CODE $(json '(d["name"], d["depth"])')" = "200 ('s4', 2)" ] || fail "sh: one group: $CODE $BODY"
get "$BASE/v1/queues/sh/groups?offset=990&limit=20"
check; if [ "$CODE" != 400 ] || ! grep -q 'offset + limit is at most 1000' "$DIR/b"; then
    fail "sh: offset + limit above 1000: $CODE $BODY"
fi
get -X DELETE "$BASE/v1/queues/gq/groups"
check; [ "$CODE" = 405 ] || fail "DELETE groups: $CODE"

# ---- pause and resume of one group ------------------------------------------------------
get -X POST "$BASE/v1/queues/gq/groups/g2/pause"
check; [ "$CODE $(json '(d["group"], d["paused"])')" = "200 ('g2', True)" ] ||
    fail "pause g2: $CODE $BODY"
get -X POST "$BASE/v1/queues/gq/groups/g2/pause"
check; [ "$CODE $(json 'd["paused"]')" = "200 True" ] || fail "pause g2 again: $CODE $BODY"
get "$BASE/v1/queues/gq/groups"
check; [ "$(json '[g["name"] for g in d["groups"] if g["paused"]]')" = "['g2']" ] ||
    fail "only g2 paused: $BODY"
get "$BASE/v1/queues/gq"
check; [ "$(json 'd["stats"]["paused"]')" = False ] || fail "the queue itself is not paused: $BODY"
# a group of the sharded queue: paused on its shard (sh~1-0), and only it
get -X POST "$BASE/v1/queues/sh/groups/s2/pause"
check; [ "$CODE $(json '(d["queue"], d["group"], d["paused"])')" = "200 ('sh', 's2', True)" ] ||
    fail "pause sh's s2: $CODE $BODY"
get "$BASE/v1/queues/sh/groups"
check; [ "$(json '[g["name"] for g in d["groups"] if g["paused"]]')" = "['s2']" ] ||
    fail "sh: only s2 paused: $BODY"
check; "$RJQ" --prefix sg groups 'sh~1-0' | grep -qx 's2 depth 4 active 0 paused' ||
    fail "s2 paused on its shard: $("$RJQ" --prefix sg groups 'sh~1-0')"
check; "$RJQ" --prefix sg groups 'sh~0-0' | grep -q paused && fail "a group of sh~0-0 paused"
get -X GET "$BASE/v1/queues/gq/groups/g2/pause"
check; [ "$CODE" = 405 ] || fail "GET .../pause: $CODE"
get -X POST "$BASE/v1/queues/gq/groups/g2/stop"
check; [ "$CODE" = 404 ] || fail "an unknown group action: $CODE"

# ---- /metrics: the 3 busiest groups only ------------------------------------------------
# a running job of a group: gw's worker runs it (active 1)
"$WORKER" -r "$redis_url" -P sg gw >"$DIR/worker.log" 2>&1 &
PIDS+=($!)
"$RJQ" --prefix sg enqueue gw "sleep:60000:x" --group runner >/dev/null || fail "enqueue gw"
for _ in $(seq 400); do
    scrape
    grep -qxF 'rjq_queue_groups{queue="gq"} 5' "$DIR/m" &&
        grep -qxF 'rjq_group_jobs{queue="gw",group="runner",state="active"} 1' "$DIR/m" &&
        grep -qxF 'rjq_group_paused{queue="gq",group="g2"} 1' "$DIR/m" &&
        grep -qxF 'rjq_group_paused{queue="sh",group="s2"} 1' "$DIR/m" && break
    sleep 0.05
done
check; promtool check metrics <"$DIR/m" >"$DIR/promtool.out" 2>&1 ||
    fail "promtool check metrics: $(cat "$DIR/promtool.out")"
check; [ -s "$DIR/promtool.out" ] && fail "promtool has something to say: $(cat "$DIR/promtool.out")"
has 'rjq_queue_groups{queue="gq"} 5'
has 'rjq_queue_groups{queue="plain"} 0'
has 'rjq_queue_groups{queue="gw"} 1'
has 'rjq_group_jobs{queue="gq",group="big",state="ready"} 6'
has 'rjq_group_jobs{queue="gq",group="big",state="active"} 0'
has 'rjq_group_jobs{queue="gq",group="g1",state="ready"} 4'
has 'rjq_group_jobs{queue="gq",group="g2",state="ready"} 3'
has 'rjq_group_paused{queue="gq",group="g2"} 1'
has 'rjq_group_paused{queue="gq",group="big"} 0'
has 'rjq_group_jobs{queue="gw",group="runner",state="ready"} 0'
has 'rjq_group_jobs{queue="gw",group="runner",state="active"} 1'
# each group's started counter (rjq_group_info.started): runner started its job
has 'rjq_group_started_total{queue="gw",group="runner"} 1'
has 'rjq_group_started_total{queue="gq",group="big"} 0'
check; [ "$(grep -c '^# TYPE rjq_group_started_total counter' "$DIR/m")" = 1 ] ||
    fail "family rjq_group_started_total declared once as a counter"
get "$BASE/v1/queues/gw/groups"
check; [ "$(json '[(g["name"], g["active"], g["started"]) for g in d["groups"]]')" = "[('runner', 1, 1)]" ] ||
    fail "runner's started counter in the listing: $BODY"
check; [ "$("$RJQ" --prefix sg groups gw | tail -1)" = "runner depth 0 active 1 started 1" ] ||
    fail "rjq groups shows runner's started counter: $("$RJQ" --prefix sg groups gw)"
check; labels=$(grep -o '^rjq_group_[a-z_]*{queue="gq",group="[^"]*"' "$DIR/m" | sed 's/.*group="//' | sort -u | tr '\n' ' ')
[ "$labels" = 'big" g1" g2" ' ] || fail "gq's group labels are its 3 busiest: $labels"
check; grep -q 'queue="plain",group=' "$DIR/m" && fail "a group series for plain"
# the sharded queue: one queue label, its 3 busiest groups over both shards
has 'rjq_queue_groups{queue="sh"} 4'
has 'rjq_group_jobs{queue="sh",group="s1",state="ready"} 5'
has 'rjq_group_jobs{queue="sh",group="s2",state="ready"} 4'
has 'rjq_group_jobs{queue="sh",group="s3",state="ready"} 3'
has 'rjq_group_paused{queue="sh",group="s2"} 1'
has 'rjq_group_paused{queue="sh",group="s1"} 0'
check; labels=$(grep -o '^rjq_group_[a-z_]*{queue="sh",group="[^"]*"' "$DIR/m" | sed 's/.*group="//' | sort -u | tr '\n' ' ')
[ "$labels" = 's1" s2" s3" ' ] || fail "sh's group labels are its 3 busiest: $labels"
check; grep -q 'queue="sh~' "$DIR/m" && fail "a series of sh's shards' names"
for f in rjq_queue_groups rjq_group_jobs rjq_group_paused; do
    check; [ "$(grep -c "^# TYPE $f gauge" "$DIR/m")" = 1 ] || fail "family $f declared once as a gauge"
done
check; grep -q '^# HELP rjq_group_jobs .*the 3 groups with the most ready jobs' "$DIR/m" ||
    fail "rjq_group_jobs' help names K: $(grep 'HELP rjq_group_jobs' "$DIR/m")"
# the busiest change: g4 grows past the others and enters, g2 leaves
enq gq g4 9
for _ in $(seq 400); do
    scrape
    grep -qxF 'rjq_group_jobs{queue="gq",group="g4",state="ready"} 10' "$DIR/m" && break
    sleep 0.05
done
has 'rjq_group_jobs{queue="gq",group="g4",state="ready"} 10'
check; grep -q 'group="g2"' "$DIR/m" && fail "g2 (4th now) still has series"
# resumed
get -X POST "$BASE/v1/queues/gq/groups/g2/resume"
check; [ "$CODE $(json 'd["paused"]')" = "200 False" ] || fail "resume g2: $CODE $BODY"
get "$BASE/v1/queues/gq/groups/g2"
check; [ "$(json 'd["paused"]')" = False ] || fail "g2 resumed: $BODY"

# (a clean stop: exit 0, and under ASan no leak nor error report)
check; stop_serve_clean rw || FAILURES=$((FAILURES + 1))

# ---- --read-only refuses the pause; --metrics-groups 0 writes no group series -----------
start_serve ro --queues 'gq' --read-only --metrics-groups 0
get -X POST "$BASE/v1/queues/gq/groups/g2/pause"
check; [ "$CODE" = 403 ] || fail "read-only pause: $CODE $BODY"
get "$BASE/v1/queues/gq/groups?limit=1"
check; [ "$CODE $(json '[g["name"] for g in d["groups"]]')" = "200 ['g4']" ] || fail "read-only listing: $CODE $BODY"
# after a scrape, two refreshes that read gq's stats (each sees one more
# job): a group read sent with the first would be in by the second
scrape
N=$(sed -n 's/^rjq_jobs_enqueued_total{queue="gq"} //p' "$DIR/m")
N=${N:-$("$RJQ" --prefix sg stats gq | sed -n 's/^enqueued *//p')}
for k in 1 2; do
    "$RJQ" --prefix sg enqueue gq "late-$k" --group late >/dev/null || fail "enqueue late"
    for _ in $(seq 400); do
        scrape
        grep -qxF "rjq_jobs_enqueued_total{queue=\"gq\"} $((N + k))" "$DIR/m" && break
        sleep 0.05
    done
done
has "rjq_jobs_enqueued_total{queue=\"gq\"} $((N + 2))"
check; grep -q 'rjq_group\|rjq_queue_groups' "$DIR/m" && fail "--metrics-groups 0: group series"
check; stop_serve_clean ro || FAILURES=$((FAILURES + 1))
check; out=$("$RJQ" serve --metrics-groups 101 2>&1); rc=$?
[ $rc = 2 ] || fail "--metrics-groups 101 refused: $rc $out"

echo "$CHECKS checks, $FAILURES failures"
[ "$FAILURES" = 0 ]
