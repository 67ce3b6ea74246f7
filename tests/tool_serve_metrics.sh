#!/usr/bin/env bash
# rjq serve's /metrics by prometheus.io's rules, and its logs:
#   - `promtool check metrics` finds nothing to say about the output;
#   - one counter family per transition (rjq_jobs_enqueued_total ...
#     rjq_job_retries_total), whose figures do not overlap: a job that
#     failed for good counts one failed attempt, one dead job, no retry;
#   - rjq_queue_latency_seconds: the age of the next ready job, 0 once
#     none is ready; rjq_build_info with the library's version;
#   - rjq_serve_requests_total{code,method} counts answers by status;
#   - --log-format json: every stderr line is one JSON object with time,
#     level and message; --access-log adds one per request answered
#     (method, path without the query, status, bytes, duration_s, remote);
#     in text, "rjq serve: request method=... status=...".
# Skipped (77) when promtool (Debian package prometheus, installed by
# scripts/install-deps.sh) is missing.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
command -v promtool >/dev/null || {
    echo "SKIP: promtool is missing (Debian package prometheus: scripts/install-deps.sh)"; exit 77; }
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test pm serve-metrics worker
has() { # has LINE: /metrics (in $DIR/m) has that exact sample line
    check; grep -qxF "$1" "$DIR/m" || fail "no line '$1' in /metrics"
}
scrape() { curl -s -o "$DIR/m" -w '%{http_code}' "$BASE/metrics"; }

# ---- the metrics ------------------------------------------------------------------
start_serve json --queues 'mw,mq' --access-log --log-format json
"$RJQ" --prefix pm enqueue mq waiting >/dev/null || fail "enqueue mq"
"$RJQ" --prefix pm enqueue mw sleep:0:ok >/dev/null || fail "enqueue mw"
"$RJQ" --prefix pm enqueue mw fail-for-good >/dev/null || fail "enqueue mw"
"$WORKER" -r "$redis_url" -P pm mw >"$DIR/worker.log" 2>&1 &
PIDS+=($!)
# until the worker's two outcomes and the waiting job's age are there
for _ in $(seq 400); do
    scrape >/dev/null
    grep -qxF 'rjq_jobs_completed_total{queue="mw"} 1' "$DIR/m" &&
        grep -qxF 'rjq_jobs_dead_total{queue="mw"} 1' "$DIR/m" &&
        grep -q '^rjq_queue_latency_seconds{queue="mq"} [0-9.]*[1-9]' "$DIR/m" && break
    sleep 0.05
done
check; promtool check metrics <"$DIR/m" >"$DIR/promtool.out" 2>&1 ||
    fail "promtool check metrics: $(cat "$DIR/promtool.out")"
check; [ -s "$DIR/promtool.out" ] && fail "promtool has something to say: $(cat "$DIR/promtool.out")"
has 'rjq_jobs_enqueued_total{queue="mw"} 2'
has 'rjq_jobs_completed_total{queue="mw"} 1'
has 'rjq_job_attempts_failed_total{queue="mw"} 1'
has 'rjq_job_retries_total{queue="mw"} 0'
has 'rjq_jobs_dead_total{queue="mw"} 1'
has 'rjq_jobs_cancelled_total{queue="mw"} 0'
has 'rjq_jobs_reclaimed_total{queue="mw"} 0'
has 'rjq_jobs_replayed_total{queue="mw"} 0'
has 'rjq_jobs_enqueued_total{queue="mq"} 1'
for f in rjq_jobs_enqueued_total rjq_jobs_completed_total rjq_job_attempts_failed_total \
         rjq_job_retries_total rjq_jobs_dead_total rjq_jobs_cancelled_total \
         rjq_jobs_reclaimed_total rjq_jobs_replayed_total rjq_queue_latency_seconds rjq_build_info \
         rjq_serve_requests_total; do
    check; [ "$(grep -c "^# TYPE $f " "$DIR/m")" = 1 ] || fail "family $f declared $(grep -c "^# TYPE $f " "$DIR/m") times"
done
# (the deprecated family is still there for this release)
has 'rjq_jobs_total{queue="mw",outcome="completed"} 1'
check; grep -q '^rjq_queue_latency_seconds{queue="mq"} [0-9.]*[1-9]' "$DIR/m" ||
    fail "mq's waiting job has no age: $(grep latency "$DIR/m")"
has 'rjq_queue_latency_seconds{queue="mw"} 0.000'
V=$("$RJQ" version | sed -n 's/^rjq //p')
has "rjq_build_info{version=\"$V\"} 1"
check; grep -q '^rjq_serve_requests_total{code="200",method="GET"} [1-9]' "$DIR/m" ||
    fail "no 200 GET counted: $(grep requests_total "$DIR/m")"
check; grep -q 'code="404"' "$DIR/m" && fail "a 404 counted before any"
curl -s -o /dev/null "$BASE/v1/nothing?token=secret"
curl -s -o /dev/null -X POST "$BASE/v1/nothing"
scrape >/dev/null
has 'rjq_serve_requests_total{code="404",method="GET"} 1'
has 'rjq_serve_requests_total{code="404",method="POST"} 1'
# the waiting job leaves ready: its queue's latency is 0 again
# (and its cancel is counted: the counters come from the stats serve
# refreshes every second, the latency from a read of its own, so a scrape
# may show one before the other: "no line
# 'rjq_jobs_cancelled_total{queue="mq"} 1'" under ASan, the wait below
# having seen the latency only)
"$RJQ" --prefix pm cancel mq "$("$RJQ" --prefix pm jobs mq ready | head -1)" >/dev/null || fail "cancel"
for _ in $(seq 400); do
    scrape >/dev/null
    grep -qxF 'rjq_queue_latency_seconds{queue="mq"} 0.000' "$DIR/m" &&
        grep -qxF 'rjq_jobs_cancelled_total{queue="mq"} 1' "$DIR/m" && break
    sleep 0.05
done
has 'rjq_queue_latency_seconds{queue="mq"} 0.000'
has 'rjq_jobs_cancelled_total{queue="mq"} 1'
kill "$SPID"
wait "$SPID"
rc=$?
check; [ $rc = 0 ] || fail "serve did not exit 0 ($rc)"

# ---- the JSON log ------------------------------------------------------------------
check; "$PY" - "$DIR/json.err" <<'PYEOF' || fail "the JSON log: see above"
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
assert lines, "no log line"
reqs, all_ = [], []
for l in lines:
    d = json.loads(l)  # every line is one object
    all_.append(d)
    assert isinstance(d, dict), l
    for k in ("time", "level", "message"):
        assert isinstance(d.get(k), str), (k, l)
    assert d["time"].endswith("Z") and "T" in d["time"], l
    if d["message"] == "request":
        reqs.append(d)
assert any(d["message"] == "signal 15: stopping" for d in all_), "no stop line"
for d in reqs:
    for k, t in (("method", str), ("path", str), ("status", int), ("duration_s", (int, float)),
                 ("remote", str)):
        assert isinstance(d.get(k), t), (k, d)
    assert "bytes" in d and (d["bytes"] is None or d["bytes"] >= 0), d
    assert d["duration_s"] >= 0 and "?" not in d["path"], d
nf = [d for d in reqs if d["path"] == "/v1/nothing"]
assert [(d["method"], d["status"]) for d in nf] == [("GET", 404), ("POST", 404)], nf
assert all("secret" not in json.dumps(d) for d in reqs), "the query (a token) was logged"
m = [d for d in reqs if d["path"] == "/metrics"]
assert m and all(d["status"] == 200 and d["bytes"] > 0 and d["remote"] == "127.0.0.1" for d in m), m
PYEOF

# ---- text, and no access log unless asked ---------------------------------------------
start_serve text --queues 'mw'
curl -s -o /dev/null "$BASE/healthz"
check; grep -q ' request ' "$DIR/text.err" && fail "an access line without --access-log: $(cat "$DIR/text.err")"
kill "$SPID"; wait "$SPID"
start_serve text2 --queues 'mw' --access-log
curl -s -o /dev/null "$BASE/v1/nothing"
kill "$SPID"; wait "$SPID"
check; grep -q '^rjq serve: request method=GET path=/v1/nothing status=404 bytes=[0-9]* duration_s=[0-9.e-]* remote=127.0.0.1$' "$DIR/text2.err" ||
    fail "no text access line: $(cat "$DIR/text2.err")"
check; out=$("$RJQ" serve --log-format xml 2>&1); rc=$?
[ $rc = 2 ] && [[ $out == *"--log-format xml: expected text or json"* ]] || fail "--log-format xml: $rc $out"

echo "$CHECKS checks, $FAILURES failures"
[ "$FAILURES" = 0 ]
