#!/usr/bin/env bash
# End-to-end test of the rjq command-line tool against a private redis-server.
#
# Env: RJQ_BUILD (build dir holding the rjq binary), RJQ_SOURCE (unused here).
# The private redis-server comes from scripts/redis-private.sh.
# Optional: RJQ_TOOL_WRAP, a command prefix for every rjq run, e.g.
#   RJQ_TOOL_WRAP="valgrind -q --leak-check=full --errors-for-leak-kinds=all --error-exitcode=99"
set -u

BUILD=${RJQ_BUILD:?RJQ_BUILD must name the build directory}
RJQ_BIN="$BUILD/rjq"
WRAP=${RJQ_TOOL_WRAP:-}
FAILURES=0
CHECKS=0

die() { echo "FATAL: $*" >&2; exit 1; }
[ -x "$RJQ_BIN" ] || die "$RJQ_BIN is not built"
command -v redis-server >/dev/null || die "redis-server not found"
command -v redis-cli >/dev/null || die "redis-cli not found"

# shellcheck source=scripts/redis-private.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/redis-private.sh"

DIR=$(mktemp -d "${TMPDIR:-/tmp}/rjq-tool-test.XXXXXX") || die "mktemp failed"
cleanup() {
    redis_private_stop # SIGCONT first: a check below stops the server
    rm -rf "$DIR"
}
trap cleanup EXIT

redis_private_start "$DIR" || die "could not start redis-server (log: $(cat "$DIR/redis.log" 2>/dev/null))"
PORT=$redis_port
export RJQ_URL=$redis_url
unset REDISCLI_AUTH # (the caller's would log every run in)
rcli() { redis-cli -p "$PORT" "$@" >/dev/null; }

# ---- helpers -----------------------------------------------------------------

# run ARGS...: run the tool; sets OUT, ERR, RC and LAST (the command line).
# Reads stdin from $IN_FILE when set.
run() {
    LAST="rjq $*"
    # shellcheck disable=SC2086
    $WRAP "$RJQ_BIN" "$@" <"${IN_FILE:-/dev/null}" >"$DIR/out" 2>"$DIR/err"
    RC=$?
    OUT=$(cat "$DIR/out")
    ERR=$(cat "$DIR/err")
}

fail() {
    FAILURES=$((FAILURES + 1))
    echo "FAIL: $LAST: $*"
    echo "  exit: $RC"
    echo "  stdout: $(head -c 600 "$DIR/out")"
    echo "  stderr: $(head -c 600 "$DIR/err")"
}

check() { CHECKS=$((CHECKS + 1)); }
expect_rc() { check; [ "$RC" = "$1" ] || fail "expected exit $1"; }
expect_out() { check; [ "$OUT" = "$1" ] || fail "expected stdout '$1'"; }
expect_line() { check; grep -qxF -- "$1" "$DIR/out" || fail "expected a stdout line '$1'"; }
expect_out_re() { check; [[ $OUT =~ $1 ]] || fail "stdout does not match /$1/"; }
expect_err_has() { check; grep -qF -- "$1" "$DIR/err" || fail "expected stderr to contain '$1'"; }
expect_err_empty() { check; [ -z "$ERR" ] || fail "expected empty stderr"; }
expect_ok() { expect_rc 0; }

now_ms() { date +%s%3N; }

# ---- enqueue and stats ----------------------------------------------------------

run enqueue q hello
expect_ok
expect_out_re '^[0-9]+$'
expect_err_empty
FIRST_ID=$OUT

run stats q
expect_ok
expect_line "enqueued 1"
expect_line "ready 1"
expect_line "delayed 0"
expect_line "dead_depth 0"
expect_line "cancelled 0"
expect_line "paused 0"
check; [ "$(wc -l <"$DIR/out")" -eq 20 ] || fail "expected 20 stats lines (dedup_reserved, dedup_next_release_ms, waiting included)"

run stats q --json
expect_ok
expect_out_re '^\{"enqueued":1,.*"ready":1,.*"dead_depth":0,.*"paused":0\}$'
check; [ "$(wc -l <"$DIR/out")" -eq 1 ] || fail "expected one JSON line"
if command -v python3 >/dev/null; then
    check
    python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ready"]==1 and d["paused"]==0 and len(d)==20 and d["dedup_reserved"]==0' \
        <"$DIR/out" 2>/dev/null || fail "stats --json is not the expected JSON object"
fi

run job q "$FIRST_ID"
expect_ok
expect_line "id $FIRST_ID"
expect_line "state ready"
expect_line "attempts 0"
expect_line "max_attempts 3"
expect_line "payload hello"
check; grep -q '^result' "$DIR/out" && fail "a ready job has no result line"

# idempotent enqueue with an explicit id
run enqueue q first --id job-1
expect_ok
expect_out "job-1"
expect_err_empty
run enqueue q second --id job-1
expect_ok
expect_out "job-1"
expect_err_has "existed"
run job q job-1
expect_line "payload first"
run stats q
expect_line "enqueued 2"
expect_line "ready 2"

# options: delay, priority, attempts; a payload that looks like an option
run enqueue q later --id later-1 --delay 60000 --priority 5 --attempts 7
expect_ok
run job q later-1 --json
expect_ok
expect_out_re '^\{"id":"later-1","state":"delayed","attempts":0,"max_attempts":7,'\
'"payload":"later","result":null,"error":null,"enqueued_ms":[0-9]{13},"started_ms":null,"ended_ms":null\}$'
run stats q
expect_line "delayed 1"
run enqueue q -- --dashed
expect_ok
run job q "$OUT"
expect_line "payload --dashed"

# JSON escaping of a payload with quotes, backslash and a tab
run enqueue q "$(printf 'a"b\\c\td')" --id esc-1
run job q esc-1 --json
expect_out_re '"payload":"a\\"b\\\\c\\td"'

# binary bytes: as they are into a pipe or a file; escaped at a terminal
# (no escape sequence or carriage return of a payload reaches it)
TTY_PAYLOAD=$(printf 'a\033[2Jb\rc\001\177\302\205d\377e\\f\tg\303\251')
run enqueue q "$TTY_PAYLOAD" --id tty-1
expect_ok
run job q tty-1
expect_line "payload $TTY_PAYLOAD"
check; command -v script >/dev/null || fail "script (util-linux) is needed for the terminal check"
LAST="rjq job q tty-1 (at a terminal)"
script -qec "$WRAP $RJQ_BIN job q tty-1" /dev/null </dev/null >"$DIR/tty" 2>"$DIR/err"
RC=$?
tr -d '\r' <"$DIR/tty" >"$DIR/out" # the terminal's CR LF line ends
expect_ok
expect_line 'payload a\x1b[2Jb\rc\x01\x7f\xc2\x85d\xffe\\f\tgé'
expect_line "state ready"
check; grep -q "$(printf '\033')" "$DIR/tty" && fail "an escape byte reached the terminal"
run job q tty-1 --json
expect_out_re '"payload":\{"base64":'

# ---- batch enqueue from stdin ------------------------------------------------------

seq -f 'line %g' 2500 >"$DIR/lines"
IN_FILE="$DIR/lines" run enqueue big -
expect_ok
expect_out "2500"
run stats big
expect_line "enqueued 2500"
expect_line "ready 2500"
run job big 1001
expect_line "payload line 1001"
run job big 2500
expect_line "payload line 2500"
IN_FILE="$DIR/lines" run enqueue big - --delay 60000
expect_out "2500"
run stats big
expect_line "enqueued 5000"
expect_line "delayed 2500"
# time spent waiting for stdin does not count against the deadline
check
out=$( (seq 1000; sleep 1.5; echo last) | $WRAP "$RJQ_BIN" -t 1 enqueue slow - 2>&1)
[ "$out" = 1001 ] || { LAST="slow stdin"; RC=; fail "expected 1001, got '$out'"; }
printf '' >"$DIR/empty"
IN_FILE="$DIR/empty" run enqueue big -
expect_ok
expect_out "0"

# ---- dead jobs, reclaim and replay ----------------------------------------------------
# The tool cannot claim, so play a worker that crashed holding three jobs of
# one attempt each: move them to the active set with an expired lease, as the
# claim script would. The tool's reclaim then buries them.

for id in d1 d2 d3; do
    run enqueue dq "payload $id" --id "$id" --attempts 1
    expect_out "$id"
    rcli LREM 'rjq:{dq}:ready' 0 "$id"
    rcli ZADD 'rjq:{dq}:active' 0 "$id"
    rcli HSET 'rjq:{dq}:state' "$id" 'active 1 crashed.1'  # state attempts token
done
run enqueue dq alive --id alive-1
run reclaim dq
expect_ok
expect_out "3"
run reclaim dq
expect_out "0"

run stats dq
expect_line "reclaimed 3"
expect_line "dead 3"
expect_line "dead_depth 3"
expect_line "ready 1"
expect_line "active 0"

run dead dq
expect_ok
expect_out "$(printf 'd1\nd2\nd3')"
run dead dq --offset 1 --limit 1
expect_out "d2"
run dead dq --offset 5
expect_ok
expect_out ""

run job dq d2
expect_line "state dead"
expect_line "attempts 1"
expect_line "error lease expired"

run replay dq d2
expect_ok
expect_out "1"
run job dq d2
expect_line "state ready"
expect_line "attempts 0"
run replay dq d2
expect_rc 1
expect_err_has "rjq: replay: the job is not in a state that allows this"
run replay dq no-such-job
expect_rc 1
expect_err_has "rjq: replay: no such job"
check; [ -z "$OUT" ] || fail "a failed replay prints nothing on stdout"

run replay dq --all --limit 1
expect_out "1"
run dead dq
expect_out "d3"
run replay dq --all
expect_out "1"
run replay dq --all
expect_ok
expect_out "0"
run stats dq
expect_line "replayed 3"
expect_line "dead_depth 0"
expect_line "ready 4"

# ---- delete and purge ----------------------------------------------------------------
# three dead jobs again (as above), one waiting

for id in e1 e2 e3; do
    run enqueue xq "payload $id" --id "$id" --attempts 1
    rcli LREM 'rjq:{xq}:ready' 0 "$id"
    rcli ZADD 'rjq:{xq}:active' 0 "$id"
    rcli HSET 'rjq:{xq}:state' "$id" 'active 1 crashed.1'
done
run enqueue xq waiting --id w1
run reclaim xq
expect_out "3"
run delete xq e2
expect_ok
expect_out "deleted"
run dead xq
expect_out "e1
e3"
run delete xq e2
expect_rc 1
expect_err_has "no such job"
run delete xq w1
expect_rc 1
expect_err_has "only dead and cancelled jobs are deleted"
run purge xq dead
expect_rc 2
expect_err_has "give --yes"
run dead xq
expect_out "e1
e3"
run dead xq --json
expect_out '["e1","e3"]'
run purge xq dead --yes
expect_ok
expect_out "2"
run dead xq
expect_out ""
run dead xq --json
expect_out "[]"
run purge xq ready --yes
expect_rc 2
run stats xq
expect_line "dead_depth 0"
expect_line "ready 1"

# ---- pause, resume, cancel ----------------------------------------------------------

# a control verb on a queue that does not exist (a mistyped name) is
# refused and writes nothing; --create sets the queue up and names it in
# the registry, so queues (and top) list it
for verb in pause resume limit; do
    run $verb pq
    expect_rc 1
    expect_out ""
    expect_err_has "rjq: $verb: queue 'pq' does not exist (nothing of it is in Redis; --create ${verb}s it anyway)"
done
run limit pq --concurrency 2 --json
expect_rc 1
expect_out ""
check; [ "$(redis-cli -p "$PORT" EXISTS 'rjq:{pq}:meta')" = 0 ] || fail "a refused verb wrote the queue's meta"
run queues
check; grep -qxF pq "$DIR/out" && fail "pq listed before it was created"
run pause pq --create
expect_ok
expect_out "paused"
run queues
expect_line "pq"
run pause pq
expect_ok
expect_out "already paused"
run stats pq
expect_line "paused 1"
check; [ "$(redis-cli -p "$PORT" HEXISTS 'rjq:{pq}:meta' paused)" = 1 ] || fail "paused is not stored"
# queue-format (README "Operations", queue format 2): stored in meta;
# back to 1 refused while a job is active (its state may hold a reply
# channel), allowed once none is; 1 and 2 only
run queue-format pq 2
expect_ok
expect_out "format 2"
check; [ "$(redis-cli -p "$PORT" HGET 'rjq:{pq}:meta' format)" = 2 ] || fail "format is not stored"
run queue-format pq 2 --json
expect_ok
expect_out '{"format":2,"changed":false}'
run queue-format pq 3
expect_rc 2
run queue-format nosuchq 2
expect_rc 1
expect_err_has "rjq: queue-format: queue 'nosuchq' does not exist"
redis-cli -p "$PORT" ZADD 'rjq:{pq}:active' 99999999999999 fmtjob >/dev/null
run queue-format pq 1
expect_rc 1
expect_err_has "the queue has active jobs"
check; [ "$(redis-cli -p "$PORT" HGET 'rjq:{pq}:meta' format)" = 2 ] || fail "a refused format 1 was stored"
redis-cli -p "$PORT" ZREM 'rjq:{pq}:active' fmtjob >/dev/null
run queue-format pq 1
expect_ok
expect_out "format 1"
check; [ "$(redis-cli -p "$PORT" HEXISTS 'rjq:{pq}:meta' format)" = 0 ] || fail "format 1 left the field"
run enqueue pq one --id c1
expect_ok
run enqueue pq two --id c2 --delay 60000 --timeout 5000
expect_ok
check; [ "$(redis-cli -p "$PORT" HGET 'rjq:{pq}:options' c2)" = "0,,;5000" ] || fail "the timeout is not stored"
run enqueue pq three --timeout 0
expect_rc 2
run enqueue pq four --dedup 1000
expect_rc 2
expect_err_has "--dedup needs --id"
run enqueue debq four --id deb --delay 60000 --debounce
expect_ok
run enqueue debq five --id deb --delay 60000 --debounce
expect_ok
expect_err_has "was waiting; it takes this payload"
run job debq deb
expect_line "payload five"
run cancel pq c1
expect_ok
expect_out "cancelled (was ready)"
run cancel pq c2
expect_out "cancelled (was delayed)"
run cancel pq c1
expect_rc 1
expect_err_has "rjq: cancel: the job is not in a state that allows this (it is cancelled already)"
run cancel pq nope
expect_rc 1
expect_err_has "rjq: cancel: no such job"
run cancel pq
expect_rc 2
run job pq c1
expect_line "state cancelled"

# ---- batch: made, filled, read, sealed, ended by its members' cancels ----------------------
run batch bq --create --id b1 --on-complete done --on-success good
expect_ok
expect_out "b1"
run batch bq b1 --add bm --payload one --job-id m1
expect_ok
expect_out "m1"
run batch bq b1 --add bm --payload two
expect_ok
expect_out_re '^[0-9]+$'
M2=$OUT
run --json batch bq b1
expect_out_re '"state":"pending","sealed":false,"total":2,"completed":0'
run batch bq b1 --seal
expect_ok
expect_out "sealed"
run batch bq b1 --add bm --payload three
expect_rc 1
expect_err_has "is sealed"
run batch bq b1 --await 1
expect_rc 1
run cancel bm m1
run batch bq b1 --await 1 --seal
expect_rc 2
run cancel bm "$M2"
run batch bq b1 --await 10000
expect_ok
expect_line "state completed"
expect_line "sealed yes"
expect_line "cancelled 2"
run jobs bq ready
expect_line "batch:b1:complete"
expect_line "batch:b1:success"
# job_shows_its_headers: a completion job's rjq.batch headers
run job bq batch:b1:complete
expect_ok
expect_line "header rjq.batch b1"
expect_line "header rjq.batch.on complete"
run job bq batch:b1:complete --json
expect_out_re '"headers":\{[^}]*"rjq.batch":"b1"'
# listed: newest first, by state, limited
run batch bq --create --id b3
expect_ok
run batches bq
expect_ok
expect_out "$(printf '%s\n' 'b3 pending 0/0 completed 0 dead 0 cancelled 0 (not sealed)' \
                      'b1 completed 2/2 completed 0 dead 0 cancelled 2')"
run batches bq --state completed
expect_out "b1 completed 2/2 completed 0 dead 0 cancelled 2"
run batches bq --state dead
expect_ok
expect_out ""
run batches bq --limit 1
expect_out "b3 pending 0/0 completed 0 dead 0 cancelled 0 (not sealed)"
run --json batches bq --state completed
expect_out_re '^\[\{"batch":"b1","state":"completed","sealed":true,"total":2,"completed":0,"dead":0,"cancelled":2,"created_ms":[0-9]+,"ended_ms":[0-9]+\}\]$'
run batches bq --state nope
expect_rc 2
run batch bq b3 --delete --force
expect_ok
# batch_not_found_says_batch: not rjq_strerror's "no such job"
run batch bq nope
expect_rc 1
expect_err_has "rjq: batch: no such batch"
run batch bq nope --seal
expect_rc 1
expect_err_has "rjq: batch: no such batch"
run batch bq b1 --add bm
expect_rc 2
# batch_add_missing_says_no_batch: not "its jobs were enqueued outside any"
run batch bq nope --add bm --payload x
expect_rc 1
expect_err_has "rjq: batch: no such batch (no batch nope)"
check; grep -qF "outside" "$DIR/err" && fail "a missing batch's add talks of jobs enqueued outside"
# deleted: a pending one only with --force
run batch bq --create --id b2 --retention -1
expect_ok
run batch bq b2 --delete
expect_rc 1
expect_err_has "pending"
expect_err_has "the batch is not in a state"
run batch bq b2 --force
expect_rc 2
run batch bq b2 --delete --force
expect_ok
expect_out "deleted"
run batch bq b2
expect_rc 1
run batch bq b1 --delete
expect_ok
run batch bq b1 --delete
expect_rc 1
run batch bq --create --retention -2
expect_rc 2
run stats pq
expect_line "cancelled 2"
expect_line "cancelled_depth 2"
expect_line "ready 0"
expect_line "delayed 0"
run resume pq
expect_ok
expect_out "resumed"
run resume pq
expect_out "not paused"
run stats pq --json
expect_out_re '"paused":0'

# dependencies (issue 39): --after waits, listed as waiting, counted in stats
run enqueue depa one --id a1 --delay 3600000
expect_ok
run enqueue depb two --id b1 --after depa:a1,depa:nosuch --after-policy ignore
expect_ok
expect_out "b1"
run job depb b1
expect_line "state waiting"
# job_shows_dependencies_and_dependents: its policy, each dependency (queue,
# id, state, how it counted), and on the dependency's page its dependents
expect_line "after_policy ignore"
expect_line "dependency depa a1 delayed counted pending"
expect_line "dependency depa nosuch missing counted ignored"
check; grep -q '^dependent' "$DIR/out" && fail "b1 has no dependents"
run job depa a1
expect_ok
expect_line "dependent depb b1"
check; grep -q '^after_policy\|^dependency' "$DIR/out" && fail "a1 has no dependencies"
run job depb b1 --json
expect_ok
check; python3 -c 'import json,sys; d=json.load(sys.stdin)
assert d["after_policy"]=="ignore" and "dependents" not in d, d
assert [(x["queue"],x["id"],x["state"],x["counted"],x["error"]) for x in d["dependencies"]]==[("depa","a1","delayed","pending",None),("depa","nosuch","missing","ignored",None)], d' \
    <"$DIR/out" || fail "job --json: its dependencies"
run job depa a1 --json
check; python3 -c 'import json,sys; d=json.load(sys.stdin)
assert d["dependents"]==[{"queue":"depb","id":"b1"}] and "dependencies" not in d and "after_policy" not in d, d' \
    <"$DIR/out" || fail "job --json: its dependents"
# job_without_dependencies_reads_them_in_one_call: rjq job of a job with
# neither dependencies nor dependents makes two script calls (the one read
# of both, rjq_queue_get_job_deps, and the job's): three before
fcalls() { redis-cli -p "$PORT" INFO commandstats | awk -F'[=,:]' '/^cmdstat_fcall:/ { print $3 }'; }
run enqueue depa lone --id l1 --delay 3600000
expect_ok
f0=$(fcalls)
run job depa l1
expect_ok
expect_line "state delayed"
f1=$(fcalls)
check; [ $((f1 - f0)) -eq 2 ] || fail "rjq job of a job without dependencies: $((f1 - f0)) script calls, 2 expected"
run jobs depb waiting
expect_out "b1"
run stats depb
expect_line "waiting 1"
run stats depb --json
expect_out_re '"waiting":1'
# waiting_in_metrics: the waiting job in the exposition (README: rjq_jobs{state="waiting"})
run metrics depb
expect_ok
expect_line 'rjq_jobs{queue="depb",state="waiting"} 1'
run enqueue depb three --after depa
expect_rc 2
expect_err_has "--after: dependency 'depa' is not QUEUE:ID"
run enqueue depb three --after depa:a1 --after-policy maybe
expect_rc 2
expect_err_has "--after-policy: 'maybe' is none of fail, run, ignore"
run enqueue depb three --after-policy run
expect_rc 2
expect_err_has "--after-policy needs --after"
# after_with_group_is_a_usage_error: not the library's "invalid job options
# (delay, priority, ...)"
run enqueue depb three --after depa:a1 --group g1
expect_rc 2
expect_err_has "--after cannot be used with --group"
run cancel depa a1
expect_ok
run job depb b1
expect_line "state ready"
expect_line "dependency depa a1 cancelled counted ignored"
run job depa a1
check; grep -q '^dependent' "$DIR/out" && fail "a1 released its dependent"
run stats depb
expect_line "waiting 0"

run limit pq --concurrency 4 --rate 50/2000
expect_ok
expect_out "limits set"
run stats pq
expect_line "limit_concurrency 4"
expect_line "limit_rate 50"
expect_line "limit_rate_window_ms 2000"
run limit pq --rate 7
run stats pq
expect_line "limit_concurrency 0"
expect_line "limit_rate 7"
expect_line "limit_rate_window_ms 1000"
run limit pq --rate 7/
expect_rc 2
run limit pq --rate /5
expect_rc 2
run limit pq --concurrency 0
expect_rc 2
run limit pq
expect_ok
expect_out "limits lifted"
run stats pq
expect_line "limit_rate 0"

# ---- metrics (Prometheus text format) -------------------------------------------------

run enqueue mq one
run enqueue 'm"q' two
run limit mq --concurrency 3 --rate 10/1500
run pause 'm"q'
run metrics mq 'm"q' q
expect_ok
expect_err_empty
# every sample line is name{labels} value; every family is declared once
check; grep -v '^#' "$DIR/out" | grep -qvE '^rjq_[a-z_]+\{queue="([^"\\]|\\.)*"(,(outcome|state)="[a-z]+")?\} [0-9.e+-]+$' &&
    fail "a sample line is not in the exposition format"
check; [ "$(grep -c '^# TYPE rjq_jobs_total counter$' "$DIR/out")" = 1 ] || fail "rjq_jobs_total declared once"
check; [ "$(grep -c '^# TYPE rjq_jobs gauge$' "$DIR/out")" = 1 ] || fail "rjq_jobs declared once"
check; [ "$(grep -c '^# HELP ' "$DIR/out")" = "$(grep -c '^# TYPE ' "$DIR/out")" ] || fail "a HELP per TYPE"
expect_line 'rjq_jobs_total{queue="mq",outcome="enqueued"} 1'
expect_line 'rjq_jobs{queue="mq",state="ready"} 1'
expect_line 'rjq_jobs{queue="m\"q",state="ready"} 1'
expect_line 'rjq_queue_paused{queue="m\"q"} 1'
expect_line 'rjq_queue_paused{queue="mq"} 0'
expect_line 'rjq_queue_limit_concurrency{queue="mq"} 3'
expect_line 'rjq_queue_limit_rate{queue="mq"} 10'
expect_line 'rjq_queue_limit_rate_window_seconds{queue="mq"} 1.5'
expect_line 'rjq_queue_limit_rate_window_seconds{queue="q"} 0'
# the same numbers as rjq stats
run stats q
q_completed=$(awk '$1 == "completed" {print $2}' "$DIR/out")
q_dead=$(awk '$1 == "dead_depth" {print $2}' "$DIR/out")
run metrics q
expect_line "rjq_jobs_total{queue=\"q\",outcome=\"completed\"} $q_completed"
expect_line "rjq_jobs{queue=\"q\",state=\"dead\"} $q_dead"
run metrics
expect_rc 2
run metrics mq mq
expect_rc 2
expect_err_has "named twice"
run jobs mq delayed --offset 100000000000000
expect_ok
expect_out ""
run jobs mq delayed --offset 100000000000000000
expect_rc 2
run stats never-written
expect_rc 1
expect_err_has "queue 'never-written' does not exist"
check; [ -z "$OUT" ] || fail "no stats for a queue that does not exist"

# ---- jobs of a state -------------------------------------------------------------------

run enqueue lq first
first_id=$OUT
run enqueue lq second --priority 3
second_id=$OUT
run enqueue lq later --delay 60000
later_id=$OUT
run jobs lq ready
expect_ok
expect_out "$second_id
$first_id"
run jobs lq ready --offset 1 --limit 1
expect_out "$first_id"
run jobs lq delayed
expect_out "$later_id"
run jobs lq ready --json
expect_ok
expect_out "[\"$second_id\",\"$first_id\"]"
run jobs lq completed --json
expect_out "[]"
run jobs lq completed
expect_ok
expect_out ""
run jobs lq waiting
expect_ok
expect_out ""
run jobs lq sleeping
expect_rc 2
expect_err_has "unknown state 'sleeping'"
run jobs lq ready --limit 1001
expect_rc 2
expect_err_has "rjq: --limit: expected an integer in [1, 1000], got '1001'"
# dead_limit_like_jobs: rjq dead takes the same --limit (1..1000) and --offset as rjq jobs
run dead lq --limit 1001
expect_rc 2
expect_err_has "rjq: --limit: expected an integer in [1, 1000], got '1001'"
run dead lq --limit 1000
expect_ok
run dead lq --offset 1125899906842625
expect_rc 2
expect_err_has "rjq: --offset: expected an integer in [0, 1125899906842624]"
# range_error_says_real_max: no "[1, 9223372036854775807]"; the real maximum, or "at least"
run batches lq --limit 0
expect_rc 2
expect_err_has "rjq: --limit: expected an integer of at least 1, got '0'"
run queues --limit 0
expect_rc 2
expect_err_has "rjq: --limit: expected an integer of at least 1, got '0'"
run enqueue lq x --delay 3153600000001
expect_rc 2
expect_err_has "rjq: --delay: expected an integer in [0, 3153600000000], got '3153600000001'"
for args in "batches lq --limit 0" "queues --limit 0" "find lq f v --limit 0" \
    "replay lq --all --limit 0" "enqueue lq x --delay -1" "batch lq --create --retention -2"; do
    # shellcheck disable=SC2086
    run $args
    expect_rc 2
    check; grep -qF "9223372036854775807" "$DIR/err" && fail "a range error prints the type's maximum"
done
# group jobs (README "Groups"): listed after the queue's own, with their group
run enqueue gq one --group acme
expect_ok
g_one=$OUT
run enqueue gq two
g_two=$OUT
run enqueue gq three --group acme --delay 60000
g_three=$OUT
run jobs gq ready
expect_ok
expect_out "$g_two
$g_one group acme"
run jobs gq delayed
expect_out "$g_three group acme"
run jobs gq ready --json
expect_ok
expect_out "[\"$g_two\",\"$g_one\"]"
run stats gq
expect_line "ready 2"
expect_line "delayed 1"
run metrics 'a{b}'
expect_rc 1
expect_err_has "invalid queue name"

# ---- schedules -----------------------------------------------------------------------

run schedule sq nightly --cron "30 2 * * *" --utc-offset 60 --payload backup --attempts 5
expect_ok
expect_out "set"
run schedule sq nightly --cron "30 2 * * *" --utc-offset 60 --payload backup --attempts 5
expect_out "unchanged"
run schedule sq beat --every 60000
expect_ok
run schedules sq
expect_ok
expect_line "$(printf 'beat\tevery 60000\t0')"
expect_line "$(printf 'nightly\tcron 30 2 * * * (UTC+60)\t0')"
run schedules sq --json
expect_out_re '^\[\{"name":"beat","spec":"every 60000","next_ms":0\}'
run schedule sq bad --cron "61 * * * *"
expect_rc 1
expect_err_has "minute"
run schedule sq bad
expect_rc 2
run schedule sq bad --every 5 --cron "* * * * *"
expect_rc 2
run schedule sq bad --every 5 --missed never
expect_rc 2
run unschedule sq beat
expect_out "removed"
run unschedule sq beat
expect_out "no such schedule"
run schedules sq
expect_out "$(printf 'nightly\tcron 30 2 * * * (UTC+60)\t0')"

# a scheduler process: it leads, enqueues each fire time, and gives its
# lease up on SIGTERM
run schedule schq beat --every 200 --payload tick
LAST="rjq scheduler schq"
# shellcheck disable=SC2086
$WRAP "$RJQ_BIN" scheduler schq >"$DIR/out" 2>"$DIR/err" &
SCHED=$!
for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$PORT" LLEN 'rjq:{schq}:ready')" -ge 4 ] && break
    sleep 0.1
done
kill -TERM "$SCHED"
wait "$SCHED"
RC=$?
expect_ok
expect_err_has "rjq: scheduler: leading schq"
check; [ "$(redis-cli -p "$PORT" LLEN 'rjq:{schq}:ready')" -ge 4 ] || fail "fewer than 4 fire times enqueued"
check; [ "$(redis-cli -p "$PORT" EXISTS 'rjq:{schq}:scheduler')" = 0 ] || fail "the lease was not given up"
check; redis-cli -p "$PORT" LRANGE 'rjq:{schq}:ready' 0 0 | grep -qE '^beat@[0-9]+$' || fail "job ids are not beat@<time>"

# ---- errors -----------------------------------------------------------------------

run stats 'a{b}'
expect_rc 1
expect_err_has "rjq: stats: invalid queue name ("
run job q missing-job
expect_rc 1
expect_err_has "rjq: job: no such job"
run enqueue q x --id 12345
expect_rc 1
expect_err_has "rjq: enqueue: invalid job id"

rcli SET 'rjq:{wt}:ready' not-a-list
run enqueue wt x
expect_rc 1
expect_err_has "rjq: enqueue: a queue key holds the wrong kind of value (WRONGTYPE"

run -u 'nonsense://x' stats q
expect_rc 1
expect_err_has "invalid Redis URL"

# another prefix is another keyspace; -u overrides RJQ_URL
RJQ_URL=redis://127.0.0.1:1 run -u "redis://127.0.0.1:$PORT" --prefix other stats q
expect_rc 1
expect_err_has "queue 'q' does not exist"
RJQ_URL=redis://127.0.0.1:1 run -u "redis://127.0.0.1:$PORT" stats q
expect_ok

# nothing listens: fails fast, exit 1
DEAD_PORT=$(redis_free_port)
T0=$(now_ms)
run -u "redis://127.0.0.1:$DEAD_PORT" stats q
T1=$(now_ms)
expect_rc 1
expect_err_has "rjq: stats: "
expect_err_has "could not connect to redis://127.0.0.1:$DEAD_PORT"
check; [ $((T1 - T0)) -lt 10000 ] || fail "took $((T1 - T0)) ms"

# a server that accepts connections but never answers: the deadline ends it
kill -STOP "$redis_pid"
T0=$(now_ms)
run -t 1 stats q
T1=$(now_ms)
kill -CONT "$redis_pid"
expect_rc 1
expect_err_has "rjq: stats: timed out (no reply from redis://127.0.0.1:$PORT within 1 s"
check; { [ $((T1 - T0)) -ge 900 ] && [ $((T1 - T0)) -lt 6000 ]; } || fail "took $((T1 - T0)) ms"

# the password of a URL is not echoed in messages
run -t 1 -u "redis://user:hunter2@127.0.0.1:$DEAD_PORT" stats q
expect_rc 1
check; grep -q hunter2 "$DIR/err" && fail "the password leaked into the message"
run -t 1 -u "redis://127.0.0.1:$DEAD_PORT?password=hunter3&db=1" stats q
expect_rc 1
check; grep -q hunter3 "$DIR/err" && fail "the ?password= leaked into the message"
expect_err_has "redis://127.0.0.1:$DEAD_PORT?password=***&db=1"

# ---- redis-cli's connection flags (issue 37) -------------------------------------------
# REDIS_URL when RJQ_URL is unset or empty; RJQ_URL first
RJQ_URL= REDIS_URL="redis://127.0.0.1:$PORT" run stats q
expect_ok
env -u RJQ_URL REDIS_URL="redis://127.0.0.1:$PORT" "$RJQ_BIN" stats q >"$DIR/out" 2>"$DIR/err"
RC=$? LAST="REDIS_URL=... rjq stats q (RJQ_URL unset)"
expect_ok
RJQ_URL="redis://127.0.0.1:$PORT" REDIS_URL=redis://127.0.0.1:1 run stats q
expect_ok
RJQ_URL=redis://127.0.0.1:1 REDIS_URL="redis://127.0.0.1:$PORT" run -t 2 stats q
expect_rc 1
expect_err_has "redis://127.0.0.1:1"
# --url, --url=URL
for args in "--url redis://127.0.0.1:$PORT" "--url=redis://127.0.0.1:$PORT"; do
    # shellcheck disable=SC2086
    RJQ_URL=redis://127.0.0.1:1 run $args stats q
    expect_ok
done
# -h and -p change the environment's URL; -p6380 as redis-cli takes it too
RJQ_URL=redis://127.0.0.1:1 run -h 127.0.0.1 -p "$PORT" stats q
expect_ok
RJQ_URL=redis://127.0.0.1:1 run "-p$PORT" stats q
expect_ok
RJQ_URL= REDIS_URL= run -p "$PORT" stats q
expect_ok
# in command-line order, as redis-cli: the last one naming the port wins; a
# URL without a port keeps the one given before it
run -u redis://127.0.0.1:1 -p "$PORT" stats q
expect_ok
run -p "$PORT" -u redis://127.0.0.1:1 -t 2 stats q
expect_rc 1
expect_err_has "could not connect to redis://127.0.0.1:1"
run -p "$PORT" -u redis://127.0.0.1 stats q
expect_ok
# -n: the database
run -p "$PORT" -n 5 enqueue ndb x
expect_ok
run -u "redis://127.0.0.1:$PORT/5" stats ndb
expect_line "enqueued 1"
run stats ndb
expect_rc 1
expect_err_has "queue 'ndb' does not exist"
run -u "redis://127.0.0.1:$PORT/5" -n 0 stats ndb
expect_rc 1
# --user with -a or --pass (percent-encoded into the URL); they override the URL's
rcli ACL SETUSER clibob on '>p@ss w:rd/%' '~*' '&*' '+@all'
run -p "$PORT" --user clibob -a 'p@ss w:rd/%' stats q
expect_ok
run -u "redis://clibob:wrong@127.0.0.1:$PORT" --pass 'p@ss w:rd/%' stats q
expect_ok
run -u "redis://clibob:wrong@127.0.0.1:$PORT" --pass=nope -t 2 stats q
expect_rc 1
check; grep -q nope "$DIR/err" && fail "the password of --pass leaked into the message"
# $REDISCLI_AUTH (redis-cli's): the password when neither -a/--pass nor the
# URL gives one; with --user it is that user's (the default user here takes
# any password: a wrong one refused shows the user was sent)
REDISCLI_AUTH='p@ss w:rd/%' run -p "$PORT" --user clibob stats q
expect_ok
REDISCLI_AUTH=wrongpw run -p "$PORT" --user clibob -t 2 stats q
expect_rc 1
check; grep -q wrongpw "$DIR/err" && fail "the password of REDISCLI_AUTH leaked into the message"
REDISCLI_AUTH='p@ss w:rd/%' run -u "redis://127.0.0.1:$PORT?username=clibob" stats q
expect_ok
REDISCLI_AUTH=wrongpw run -u "redis://127.0.0.1:$PORT?username=clibob" -t 2 stats q
expect_rc 1
# -a and the URL's password win over it
REDISCLI_AUTH=wrongpw run -p "$PORT" --user clibob -a 'p@ss w:rd/%' stats q
expect_ok
REDISCLI_AUTH=wrongpw run -u "redis://clibob:p%40ss%20w%3Ard%2F%25@127.0.0.1:$PORT" stats q
expect_ok
REDISCLI_AUTH= run -p "$PORT" --user clibob stats q
expect_rc 2
expect_err_has "REDISCLI_AUTH"
# the library's URL query options: ?db= (redis://:pw@host:port?db=N was
# refused with "port must be 1..65535")
run -u "redis://clibob:p%40ss%20w%3Ard%2F%25@127.0.0.1:$PORT?db=6" enqueue qdb x
expect_ok
run -u "redis://127.0.0.1:$PORT/6" stats qdb
expect_line "enqueued 1"
run -u "redis://127.0.0.1:$PORT?protocol=3" stats q
expect_rc 1
expect_err_has "RESP2"
rcli ACL DELUSER clibob
# an IPv6 -h goes in brackets
run -t 1 -h ::1 -p "$DEAD_PORT" stats q
expect_rc 1
expect_err_has "redis://[::1]:$DEAD_PORT"
# -p is the port: a prefix there fails, pointing at --prefix (no silent connect)
run -p myapp stats q
expect_rc 2
expect_out ""
expect_err_has "-p is the port"
expect_err_has "--prefix myapp"
run -u "redis://127.0.0.1:$PORT" -p 17330x queues
expect_rc 2
for args in "-p 0 stats q" "-p 65536 stats q" "-n x stats q" "-n -1 stats q" "-h a/b stats q" \
    "--user bob stats q" "-u unix:///tmp/x.sock -p 1 stats q" "-a" "--url"; do
    # shellcheck disable=SC2086
    run $args
    expect_rc 2
    check; [ -z "$OUT" ] || fail "usage errors print nothing on stdout"
    check; [ -n "$ERR" ] || fail "usage errors explain themselves on stderr"
done
run --user bob stats q
expect_err_has "--user needs a password too"
run -u unix:///tmp/x.sock -p 1 stats q
expect_err_has "write them in that URL"

# ---- usage ----------------------------------------------------------------------------

run --version
expect_ok
expect_out_re '^rjq [0-9]+\.[0-9]+\.[0-9]+$'
run version
expect_ok
expect_out_re '^rjq [0-9]+\.[0-9]+\.[0-9]+$'
run -u redis://127.0.0.1:1 version
expect_ok
expect_out_re '^rjq [0-9]+\.[0-9]+\.[0-9]+$'

for args in "" "frobnicate q" "stats" "enqueue q" "enqueue q a b" \
    "enqueue q - --id x" "enqueue q x --priority 2000000" "enqueue q x --delay -1" \
    "enqueue q x --attempts zero" "enqueue q x --bogus" "replay q" "replay q id --all" \
    "replay q id --limit 3" "dead q --limit 0" "job q" "-t 0 stats q" "-x stats q"; do
    # shellcheck disable=SC2086
    run $args
    expect_rc 2
    check; [ -z "$OUT" ] || fail "usage errors print nothing on stdout"
    check; [ -n "$ERR" ] || fail "usage errors explain themselves on stderr"
done
# asked for, the usage text is the answer: stdout, exit 0
for args in "help" "--help" "-h"; do
    run $args
    expect_rc 0
    check; grep -q "usage: rjq" "$DIR/out" || fail "help prints the usage on stdout"
done

# per-command help: rjq help COMMAND and rjq COMMAND --help say the same, on
# stdout, exit 0: the usage, the options and an example; every command listed
# by rjq help has its own
run help
expect_ok
COMMANDS=$(sed -n '/^commands:$/,/^$/p' "$DIR/out" | awk 'NF > 1 {print $1}')
check; [ "$(echo "$COMMANDS" | wc -l)" -ge 20 ] || fail "rjq help lists the commands"
# help_lists_every_command: each command of tools/rjq.c's table is in the list
# (shards, batches, groups and group were missing)
TABLE=$(sed -n '/^} commands\[\] = {$/,/^};$/p' "$(dirname "${BASH_SOURCE[0]}")/../tools/rjq.c" |
        grep -o '{"[a-z]*", cmd_' | cut -d'"' -f2)
check; [ "$(echo "$TABLE" | wc -l)" -ge 20 ] || fail "tools/rjq.c's command table read"
for c in $TABLE; do
    echo "$COMMANDS" | grep -qx "$c" || fail "rjq help lists the command $c"
done
for c in $COMMANDS; do
    run help "$c"
    expect_ok
    expect_out_re "^usage: rjq \[options\] $c"
    expect_out_re $'\nexample:\n  rjq '
    expect_err_empty
    HELP=$OUT
    [ "$c" = help ] && continue
    run "$c" --help
    expect_ok
    check; [ "$OUT" = "$HELP" ] || fail "rjq $c --help differs from rjq help $c"
done
run help stats
expect_line "  --json         one JSON object"
# serve's own options
run serve --help
expect_ok
for o in --listen --queues --read-only --token-file --max-body --wait-max --max-queues \
    --max-requests --max-waiting --request-timeout --queue-idle --demo --log-format --access-log; do
    expect_out_re "
  $o "
done
# global options before, and -h after the command, are help too
run -p "$PORT" --prefix x enqueue -h
expect_ok
expect_out_re '^usage: rjq \[options\] enqueue QUEUE PAYLOAD'
for args in "help nope" "nope --help" "help stats jobs"; do
    # shellcheck disable=SC2086
    run $args
    expect_rc 2
    expect_out ""
done
# a usage error names the command's help
run jobs q
expect_rc 2
expect_err_has "(see rjq help jobs)"

# ---- bash completion (tools/completion/rjq.bash) -----------------------------------------
COMPLETION="$(dirname "${BASH_SOURCE[0]}")/../tools/completion/rjq.bash"
# complete WORDS...: what the completion offers for the last word (the words
# as a shell hands them over: COMP_WORDS, COMP_CWORD, COMP_LINE, COMP_POINT),
# one a line in $DIR/out; complete_words_only: without COMP_LINE
complete_run() { # line|words WORDS...
    local how=$1
    shift
    LAST="completion of: $*"
    [ "$how" = words ] && LAST="completion (COMP_WORDS only) of: $*"
    bash -c 'how=$1; source "$2" || exit 9; shift 2
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); unset COMP_LINE COMP_POINT
        if [ "$how" = line ]; then COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; fi
        _rjq; printf "%s\n" "${COMPREPLY[@]}"' _ "$how" "$COMPLETION" "$@" >"$DIR/out" 2>"$DIR/err"
    RC=$?
    OUT=$(cat "$DIR/out")
    ERR=$(cat "$DIR/err")
}
complete_words() { complete_run line "$@"; }
complete_words_only() { complete_run words "$@"; }
complete_words "$RJQ_BIN" ""
expect_ok
expect_err_empty
for c in $COMMANDS; do expect_line "$c"; done
complete_words "$RJQ_BIN" sta
expect_out "stats"
complete_words "$RJQ_BIN" --pre
expect_out "--prefix"
complete_words "$RJQ_BIN" -p "$PORT" help sche
expect_out "$(printf 'schedule\nschedules\nscheduler')"
# each command's options, as its help lists them
for c in $COMMANDS; do
    run help "$c"
    OPTS=$(grep -oE '^  --[a-z-]+' "$DIR/out")
    complete_words "$RJQ_BIN" "$c" --
    for o in $OPTS --json --help; do expect_line "$o"; done
done
complete_words "$RJQ_BIN" serve --listen 127.0.0.1:0 --re
expect_out "$(printf -- '--read-only\n--request-timeout')"
complete_words "$RJQ_BIN" acl --role w
expect_out "worker"
complete_words "$RJQ_BIN" jobs q ""
expect_out "$(printf 'ready\ndelayed\nactive\ndead\ncancelled\ncompleted\nwaiting')"
complete_words "$RJQ_BIN" jobs q w # (the dependents' state, rjq help jobs)
expect_out "waiting"
complete_words "$RJQ_BIN" enqueue q x --after q:a --after-policy ""
expect_out "$(printf 'fail\nrun\nignore')"
complete_words "$RJQ_BIN" batches q --state ""
expect_out "$(printf 'pending\ncompleted\ndead')"
complete_words "$RJQ_BIN" purge q d
expect_out "dead"
# queue names, from rjq queues with the connection options typed
run enqueue compa x
run enqueue compb x
run --prefix cp enqueue pq1 x
complete_words "$RJQ_BIN" stats comp
expect_out "$(printf 'compa\ncompb')"
complete_words "$RJQ_BIN" metrics compa comp
expect_out "$(printf 'compa\ncompb')"
RJQ_URL=redis://127.0.0.1:1 complete_words "$RJQ_BIN" -p "$PORT" stats comp
expect_out "$(printf 'compa\ncompb')"
RJQ_URL=redis://127.0.0.1:1 complete_words "$RJQ_BIN" -u "redis://127.0.0.1:$PORT" enqueue compb
expect_out "compb"
RJQ_URL=redis://127.0.0.1:1 complete_words "$RJQ_BIN" "--url=redis://127.0.0.1:$PORT" -t 5 pause co
expect_out "$(printf 'compa\ncompb')"
complete_words "$RJQ_BIN" --prefix cp stats ""
expect_out "pq1"
# an option's value is not taken for the queue, whichever line of the
# completion's lists names the option
for o in --attempts --timeout --missed --lease --max-requests --max-waiting; do
    complete_words "$RJQ_BIN" enqueue "$o" 3 comp
    expect_out "$(printf 'compa\ncompb')"
done
complete_words "$RJQ_BIN" stats compa ""
expect_out ""
# nothing reachable: no names, no noise
RJQ_URL=redis://127.0.0.1:1 complete_words "$RJQ_BIN" stats comp
expect_ok
expect_out ""
expect_err_empty
complete_words_only "$RJQ_BIN" -p "$PORT" stats comp
expect_out "$(printf 'compa\ncompb')"
# zsh: only where zsh is installed
if command -v zsh >/dev/null; then
    ZCOMP="$(dirname "${BASH_SOURCE[0]}")/../tools/completion/_rjq"
    LAST="zsh -n _rjq"
    zsh -n "$ZCOMP" >"$DIR/out" 2>"$DIR/err"
    RC=$?
    expect_ok
    check; head -1 "$ZCOMP" | grep -qx '#compdef rjq' || fail "_rjq starts with #compdef rjq"
fi

# ---- rjq cluster on a standalone server (issue 34): the server, every queue --------
run enqueue cq-standalone one
expect_ok
run cluster
expect_ok
expect_out_re '^not a cluster: one server, every queue is on it'$'\n'"127\.0\.0\.1:$PORT"$'\n'
expect_out_re $'\n  work since start: [0-9]+ commands \(100\.0%\), cpu [0-9.]+ s \([0-9.]+%\)\n'
expect_out_re $'\n  queues \([0-9]+\):.* cq-standalone'
expect_err_empty
run cluster --interval 50 --json
expect_ok
expect_out_re '^\[\{"address":"127\.0\.0\.1:'"$PORT"'","slots":\[\],"replicas":\[\],"commands":[0-9]+,"commands_share":100\.0,"cpu_s":[0-9.]+,"cpu_share":[0-9.]+,"queues":\[.*"cq-standalone".*\]\}\]$'
run cluster --interval 0
expect_rc 2

# ---- --json on every command (issue 15): always valid JSON ----------------------------
# a payload that is not UTF-8 comes back in base64, marked
printf 'ok\xff\xfe\n' >"$DIR/bin-line"
run enqueue jq "$(printf 'caf\xc3\xa9')" --id utf-1 --json
expect_ok
expect_out '{"id":"utf-1","existed":false,"replaced":false}'
run job jq utf-1 --json
expect_out_re '"payload":"caf.+"'
run enqueue jq "$(printf 'x\xff\xfe')" --id bin-1
run job jq bin-1 --json
expect_out_re '"payload":\{"base64":"eP/\+"\}'
run --json enqueue jq again --id utf-1
expect_out '{"id":"utf-1","existed":true,"replaced":false}'
IN_FILE="$DIR/lines" run enqueue jq - --json
expect_out '{"enqueued":2500}'
run --json version
expect_out_re '^\{"version":"[0-9]+\.[0-9]+\.[0-9]+"\}$'
run pause jq --json
expect_out '{"paused":true,"changed":true}'
run resume jq --json
expect_out '{"paused":false,"changed":true}'
run cancel jq bin-1 --json
expect_out '{"cancelled":true,"was":"ready"}'
run reclaim jq --json
expect_out '{"reclaimed":0}'
run replay jq --all --json
expect_out '{"replayed":0}'
run purge jq cancelled --yes --json
expect_out '{"deleted":1}'
run limit jq --concurrency 2 --json
expect_out '{"limits":"set"}'
run schedule jq tick --every 60000 --json
expect_out '{"schedule":"set"}'
run unschedule jq tick --json
expect_out '{"schedule":"removed"}'
run metrics jq q --json
expect_ok
run acl --queues 'jq*' --json
expect_ok
expect_out_re '^\{"users":\["ACL SETUSER rjq-producer '
if command -v python3 >/dev/null; then
    run enqueue jq "$(printf 'y\xfe')" --id bin-2
    for args in "job jq bin-2 --json" "job jq utf-1 --json" "metrics jq q --json" "acl --json" "stats jq --json" \
                "jobs jq ready --json" "schedules jq --json" "--json version"; do
        # shellcheck disable=SC2086
        run $args
        check
        python3 -c 'import json,sys; json.load(sys.stdin)' <"$DIR/out" 2>/dev/null ||
            fail "not valid JSON"
    done
fi

# ---- queues: the registry of the queues written to ---------------------------------------
run stats never-written
run queues
expect_ok
expect_line "q"
expect_line "jq"
check; grep -qxF "never-written" "$DIR/out" && fail "a queue only looked at is not listed"
ALL=$OUT
check; [ "$ALL" = "$(printf '%s\n' "$ALL" | LC_ALL=C sort)" ] || fail "names in order"
run queues --limit 2
expect_out "$(printf '%s\n' "$ALL" | head -2)"
run queues --after "$(printf '%s\n' "$ALL" | head -1)" --limit 1
expect_out "$(printf '%s\n' "$ALL" | sed -n 2p)"
run queues --json
expect_out_re '^\[".*"\]$'
if command -v python3 >/dev/null; then
    check
    python3 -c 'import json,sys; d=json.load(sys.stdin); assert "q" in d and "jq" in d' <"$DIR/out" ||
        fail "queues --json is not the array of names"
fi

# names of any length and bytes across pages: a registry entry no queue can
# have (written by someone else) ends a page of 1000, the next page follows it
LONG=$(printf 'L%.0s' $(seq 250))
# shellcheck disable=SC2046
redis-cli -p "$PORT" ZADD rjq:queues $(for i in $(seq -w 1 999); do echo "0 A$i"; done) \
    0 "$LONG" 0 "zz-after" >/dev/null
run queues
expect_ok
check; [ "$(grep -c '^A' "$DIR/out")" = 999 ] || fail "999 names of the first page"
expect_line "$LONG"
expect_line "zz-after"
run queues --json
expect_ok
if command -v python3 >/dev/null; then
    check
    python3 -c 'import json,sys; d=json.load(sys.stdin); assert "zz-after" in d and len(d) > 1001' \
        <"$DIR/out" || fail "queues --json across pages"
fi
redis-cli -p "$PORT" ZREMRANGEBYLEX rjq:queues "[A001" "[A999" >/dev/null
redis-cli -p "$PORT" ZREM rjq:queues "$LONG" zz-after >/dev/null
# an id with a quote, in JSON
run --json enqueue jq x --id 'x"y'
expect_out '{"id":"x\"y","existed":false,"replaced":false}'
# an error prints nothing on stdout, also with --json
run -u redis://127.0.0.1:1 -t 2 --json queues
expect_rc 1
check; [ -z "$OUT" ] || fail "nothing on stdout after an error"

# --name=value as getopt_long takes it
run queues --limit=1
expect_ok
expect_out "$(printf '%s\n' "$ALL" | head -1)"
run queues --json=yes
expect_rc 2
run --cacert=/nonexistent stats q
expect_rc 2
expect_err_has "TLS options given for a plain URL"

# --help after a command: the usage on stdout, exit 0; after -- it is an argument
run stats --help
expect_ok
expect_out_re '^usage: rjq '
expect_err_empty
run serve -h
expect_ok
expect_out_re 'serve \[--listen ADDR:PORT\]'
run enqueue q -- --help
expect_ok
expect_out_re '^[0-9]+$'

# ---- sharded queues: rjq shards, and stats of one queue -------------------------------
run shards sq 3
expect_ok
expect_out "$(printf 'shards 3\nshard sq~0-0\nshard sq~1-0\nshard sq~2-0')"
run shards sq --json
expect_ok
expect_out '{"shards":3,"names":["sq~0-0","sq~1-0","sq~2-0"]}'
# stats_of_a_declared_empty_sharded_queue: zeros and its shard count, not
# "does not exist"
run stats sq
expect_ok
expect_line "ready 0"
expect_line "shards 3"
for i in 1 2 3 4 5 6; do run enqueue sq "job $i" --id "sid-$i"; expect_ok; done
run enqueue sq anonymous
expect_ok
expect_out_re '^a[0-9A-Za-z]+\.[0-9]+\.[0-9]+$' # made by the library (docs/sharding.md 6a)
ANON_ID=$OUT
run enqueue sq again --id sid-1
expect_ok
expect_out sid-1
# one queue: 7 jobs, summed over the shards, and only those of the shards
run stats sq
expect_ok
expect_line "ready 7"
expect_line "enqueued 7"
expect_line "shards 3"
check; [ "$(redis-cli -p "$PORT" EXISTS 'rjq:{sq}:ready')" = 0 ] || fail "a job went to the unsharded queue"
run stats sq --shards --json
expect_ok
check; [ "$(wc -l <"$DIR/out")" -eq 4 ] || fail "expected the sum and 3 shards' objects"
check; [ "$(grep -o '"ready":[0-9]*' "$DIR/out" | tail -3 | awk -F: '{s += $2} END {print s}')" = 7 ] \
    || fail "the shards' ready do not add up to 7"
# another count is refused while it has jobs; calls that do not span shards are refused
run shards sq 4
expect_rc 1
expect_err_has "changes only while it is empty"
# shards_busy_says_the_count: not rjq_strerror's "already in progress"
expect_err_has "rjq: shards: the shard count cannot change now"
# whole-queue calls act on every shard, calls by id on the id's shard
run pause sq
expect_ok
expect_out "paused"
run stats sq --shards
expect_ok
check; [ "$(grep -c '^paused 1$' "$DIR/out")" -eq 4 ] || fail "not every shard is paused"
run resume sq
expect_ok
expect_out "resumed"
run cancel sq sid-2
expect_ok
expect_out "cancelled (was ready)"
run job sq "$ANON_ID"
expect_ok
expect_line 'state ready'
run job sq sid-2
expect_ok
expect_line "state cancelled"
run jobs sq ready
expect_ok
check; [ "$(wc -l <"$DIR/out")" -eq 6 ] || fail "expected the 6 ready jobs of the 3 shards"
check; grep -qxF sid-2 "$DIR/out" && fail "a cancelled job listed as ready"
run limit sq --rate 10
expect_ok
run stats sq --shards
expect_ok
check; [ "$(grep -c '^limit_rate ' "$DIR/out")" -eq 4 ] || fail "expected the sum's and 3 shards' rates"
expect_line "limit_rate 10"
expect_line "limit_rate 4"
run limit sq --rate 2
expect_rc 1
expect_err_has "cannot be split"
run limit sq
expect_ok
# job groups on a sharded queue: each group on one shard, listed once
run enqueue sq ga1 --group acme
expect_ok
run enqueue sq ga2 --group acme
expect_ok
run enqueue sq gz1 --group zeta
expect_ok
run groups sq
expect_ok
expect_out "$(printf 'groups 2\nacme depth 2 active 0\nzeta depth 1 active 0')"
run group sq '*' --concurrency 2
expect_ok
run group sq acme --pause
expect_ok
run groups sq acme
expect_ok
expect_out "$(printf 'groups 1\nacme depth 2 active 0 concurrency 2 paused')"
# group_without_option_keeps_pause: back to the defaults' settings, still paused
run group sq acme
expect_ok
run groups sq acme
expect_out "$(printf 'groups 1\nacme depth 2 active 0 concurrency 2 paused')"
# one_group_without_jobs_counts_0: listed with zeros, "groups 0" (README "Groups")
run groups sq nobody
expect_ok
expect_out "$(printf 'groups 0\nnobody depth 0 active 0 concurrency 2')"
run groups gq nobody
expect_ok
expect_out "$(printf 'groups 0\nnobody depth 0 active 0')"
# group_bad_name_says_why: not a bare "invalid argument"
run group sq 'bad name' --concurrency 1
expect_rc 1
expect_err_has "1..64 bytes of [A-Za-z0-9_.:@-]"
# group_weight_rate_bound_on_its_shard: rjq group's --weight, --rate N/MS and --max-waiting
# go to the group's shard (its pause kept), rjq groups shows them, the bound refuses the
# enqueue past it (nothing written), --resume alone resumes, no option: the defaults again
run group sq acme --weight 3 --rate 5/2000 --max-waiting 2
expect_ok
run groups sq acme
expect_ok
expect_out "$(printf 'groups 1\nacme depth 2 active 0 concurrency 2 weight 3 rate 5/2s max_waiting 2 paused')"
run groups sq acme --json
expect_ok
expect_out '{"total":1,"groups":[{"name":"acme","depth":2,"active":0,"concurrency":2,"weight":3,"paused":true,"rate":5,"rate_window_ms":2000,"max_waiting":2,"started":0}]}'
run enqueue sq ga3 --group acme
expect_rc 1
expect_err_has "max_waiting 2"
run groups sq acme
expect_out "$(printf 'groups 1\nacme depth 2 active 0 concurrency 2 weight 3 rate 5/2s max_waiting 2 paused')"
run group sq acme --resume --rate 1
expect_rc 2
run group sq acme --resume
expect_ok
run groups sq acme
expect_out "$(printf 'groups 1\nacme depth 2 active 0 concurrency 2 weight 3 rate 5/2s max_waiting 2')"
run group sq acme
expect_ok
run groups sq acme
expect_out "$(printf 'groups 1\nacme depth 2 active 0 concurrency 2')"
# group_rate_shown_with_its_unit: rjq groups prints a rate limit as users read it
# (as the dashboard does): whole seconds in s, whole minutes in min, else ms
for pair in 50:50/1s 3/250:3/250ms 2/120000:2/2min 7/1500:7/1500ms; do
    run group sq acme --rate "${pair%%:*}"
    expect_ok
    run groups sq acme
    expect_out "$(printf 'groups 1\nacme depth 2 active 0 concurrency 2 rate %s' "${pair#*:}")"
done
run group sq acme
expect_ok
check; [ "$(redis-cli -p "$PORT" --scan --pattern 'rjq:{sq~*}:g:r:acme' | wc -l)" -eq 1 ] \
    || fail "group acme's jobs on more than one shard"
run shards sq 0
expect_rc 2
run queues # one queue: its shards (registered by their own writes) not listed
expect_ok
expect_line "sq"
check; ! grep -q '^sq~' "$DIR/out" || fail "rjq queues lists sq's shards"
check; redis-cli -p "$PORT" ZSCORE rjq:queues 'sq~0-0' | grep -q . || fail "sq~0-0 not in the registry"

# ---- index, find: the index of declared JSON fields ----------------------------------------
run enqueue ix '{"customer":"acme","n":1}'
expect_ok
run index ix
expect_ok
expect_out "no index"
run find ix customer acme
expect_rc 1
expect_err_has "not indexed"
run index ix "bad name"
expect_rc 2
expect_err_has "a FIELD is"
run index ix customer customer
expect_rc 2
run index ix a b c d e
expect_rc 2
check; [ "$(redis-cli -p "$PORT" HEXISTS rjq:{ix}:meta index 2>/dev/null)" != 1 ] || fail "a refused declaration wrote"
# declaring indexes the job there already (the fill), so lookups use it
run index ix customer
expect_ok
expect_out "index customer: covers 1 of 1 jobs"
run enqueue ix '{"customer":"acme","n":2}'
expect_ok
ID2=$OUT
run enqueue ix '{"customer":"bolt"}'
expect_ok
run find ix customer acme
expect_ok
check; [ "$(wc -l <"$DIR/out")" = 2 ] || fail "expected 2 jobs"
expect_line "$ID2 ready"
run --json find ix customer bolt
expect_ok
expect_out_re '^\[\{"id":"[0-9]+","state":"ready"\}\]$'
run --json index ix
expect_ok
expect_out '{"fields":["customer"],"covered":3,"total":3}'
# a job written without the index (as a producer that has not learnt it):
# lookups refuse until the index covers it again
rcli HSET rjq:{ix}:payload zz '{"customer":"acme"}'
run find ix customer acme
expect_rc 1
expect_err_has "covers 3 of 4 jobs"
run index ix customer
expect_ok
expect_out "index customer: covers 4 of 4 jobs"
run find ix customer acme
expect_ok
expect_line "zz ready"
run index ix --drop
expect_ok
expect_out "no index"
check; [ "$(redis-cli -p "$PORT" EXISTS rjq:{ix}:index rjq:{ix}:indexed)" = 0 ] || fail "the dropped index stayed"

# ---- the server survived it all ---------------------------------------------------------
run stats q
expect_ok

echo "$CHECKS checks, $FAILURES failed"
[ "$FAILURES" -eq 0 ]
