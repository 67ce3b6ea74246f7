#!/usr/bin/env bash
# rjq serve end to end: every route and status of the HTTP API, read-only
# and token modes, the event stream, /metrics, a client that resets its
# connection mid-wait (its await is cancelled) or half-closes it (it still
# gets its answer), and a clean exit on SIGTERM (exit 0: under ASan, no
# leak). Clients: curl, and python3 for the socket-level cases.
set -u
BUILD=${RJQ_BUILD:?RJQ_BUILD must name the build directory}
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
RJQ="$BUILD/rjq"
WORKER="$BUILD/rjq-gateway_worker"
[ -x "$RJQ" ] || { echo "FAIL: $RJQ not built"; exit 1; }
if ! "$RJQ" serve --help 2>&1 | grep -q . || "$RJQ" serve --listen x 2>&1 | grep -q "built without"; then
    echo "SKIP: rjq was built without serve (libjansson-dev)"; exit 0
fi
command -v curl >/dev/null || { echo "FAIL: curl is needed (scripts/install-deps.sh)"; exit 1; }
# (/usr/bin/python3: a python3 first on PATH may be a slow shim; python never
# runs inside a timed window here)
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "FAIL: /usr/bin/python3 is needed (scripts/install-deps.sh)"; exit 1; }
# shellcheck source=scripts/redis-private.sh
. "$SRC/scripts/redis-private.sh"
# shellcheck source=tests/serve_helpers.bash
. "$SRC/tests/serve_helpers.bash"
SERVE_PREFIX=t
serve_setup serve
FAILURES=0 CHECKS=0
fail() { FAILURES=$((FAILURES + 1)); echo "FAIL: $*"; }


# req METHOD PATH [curl args...]: sets CODE, BODY (and the headers in $DIR/h).
req() {
    local m=$1 p=$2; shift 2
    local how=(-X "$m")
    [ "$m" = HEAD ] && how=(-I) # (-X HEAD would wait for a body that never comes)
    CODE=$(curl -s "${how[@]}" -D "$DIR/h" -o "$DIR/b" -w '%{http_code}' "$@" "$BASE$p")
    BODY=$(cat "$DIR/b")
    LAST="$m $p"
}
expect() { # expect CODE [BODY-REGEX]
    CHECKS=$((CHECKS + 1))
    if [ "$CODE" != "$1" ]; then fail "$LAST: status $CODE, expected $1 (body: ${BODY:0:300})"; return; fi
    if [ $# -ge 2 ] && ! [[ $BODY =~ $2 ]]; then fail "$LAST: body '${BODY:0:300}' does not match /$2/"; fi
}
header_has() { CHECKS=$((CHECKS + 1)); grep -qi "^$1" "$DIR/h" || fail "$LAST: no header '$1'"; }
# the keys (but those that come and go by themselves: a monitor's flag, the
# sweep guard, the history the server flushes every second)
keys() { redis-cli -p "$redis_port" --scan | grep -vE ':(monitored|sweep|hist:[mh])$' | sort; }
json() { "$PY" -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$BODY"; }
# wait_served N: until GET /v1/server says "served":N (BODY: its last answer).
wait_served() {
    for _ in $(seq 1200); do req GET /v1/server; [[ $BODY == *"\"served\":$1,"* ]] && break; sleep 0.05; done
}
refreshes() { sed -n 's/.*"refreshes":\([0-9]*\).*/\1/p' <<<"$BODY"; }
# wait_refreshes: until the server has refreshed 3 times since its answer in BODY.
wait_refreshes() {
    local r0
    r0=$(refreshes)
    for _ in $(seq 1200); do req GET /v1/server; [ "$(refreshes)" -ge $((r0 + 3)) ] && break; sleep 0.05; done
}

start_serve main --queues 'w,t,bin,jobs*,lk,z*' --max-body 1000
MAIN_PID=$SPID MAIN=$BASE

# ---- probes and refusals -------------------------------------------------------
req GET /healthz; expect 200 '"ok"'
req GET /v1/server; expect 200 '"read_only":false'
req GET /v1/queues/jobsnever; expect 404 'never written'
req GET /v1/queues/never; expect 404 'not served'
req GET /v1/nothing; expect 404 'no such route'
before=$(keys)
req POST /v1/queues/other/jobs --data x; expect 404 'not served'
req POST "/v1/queues/t/jobs?priority=abc" --data x; expect 400 'priority'
req POST "/v1/queues/t/jobs?dedup=5" --data x; expect 400 'dedup needs an id'
req POST "/v1/queues/t/jobs?id=a&wait=1" -H 'Idempotency-Key: b' --data x; expect 400 'differ'
req POST "/v1/queues/t/jobs?id=12" --data x; expect 400 'invalid job id'
head -c 1001 /dev/zero | tr '\0' a >"$DIR/big"
req POST /v1/queues/t/jobs --data-binary @"$DIR/big"; expect 413 '^\{"error":"the request is too large \(--max-body 1000 bytes\)"\}$'
header_has "Content-Type: application/json"
head -c 300000 /dev/zero | tr '\0' a >"$DIR/huge" # (past the body and head bounds: answered while it comes)
req POST /v1/queues/t/jobs --data-binary @"$DIR/huge"; expect 413 '^\{"error":"the request is too large \(--max-body 1000 bytes\)"\}$'
header_has "Content-Type: application/json"
req POST /v1/queues/t/jobs -H 'Expect: 100-continue' --data-binary @"$DIR/huge"; expect 413 '"error":"the request is too large'
req GET /v1/server; expect 200 '"too_large":2[,}]'
CHECKS=$((CHECKS + 1)); [ "$(keys)" = "$before" ] || fail "refused requests wrote to Redis: $(diff <(echo "$before") <(keys) | head -5)"

# ---- enqueue ------------------------------------------------------------------------
req POST /v1/queues/t/jobs --data hello; expect 201 '"existed":false'; header_has "X-Job-Id:"
header_has "Location: /v1/queues/t/jobs/"
ID1=$(json "$BODY" "d['id']")
req PATCH /v1/queues/t; expect 405; header_has "Allow: GET"
req PUT /v1/queues/t/jobs; expect 405; header_has "Allow: GET, POST"
req OPTIONS /v1/queues/t; expect 204; header_has "Allow:"
req POST "/v1/queues/t/jobs?id=order-7&priority=5&attempts=2" --data o7; expect 201 '"id":"order-7"'
req POST /v1/queues/t/jobs -H 'Idempotency-Key: order-7' --data o7; expect 200 '"existed":true'
head -c 1000 /dev/zero | tr '\0' b >"$DIR/limit"
req POST /v1/queues/t/jobs --data-binary @"$DIR/limit"; expect 201   # at the limit: taken
printf '\xff\xfe\x00\x01' >"$DIR/binary"
req POST "/v1/queues/bin/jobs?id=b1" --data-binary @"$DIR/binary"; expect 201
# dependencies (issue 39): ?after= waits for other jobs, of any queue
req POST "/v1/queues/zdeps/jobs?id=dep-1&after=t:order-7,zdeps:none&after_policy=run" --data d; expect 201 '"id":"dep-1"'
req GET /v1/queues/zdeps/jobs/dep-1; expect 200 '"state":"waiting"'
req GET /v1/queues/zdeps; expect 200 '"waiting":1'
req GET /v1/queues/zdeps/jobs/dep-1/dependencies; expect 200 '"queue":"zdeps","id":"none","state":"missing","counted":"missing"'
req GET /v1/queues/zdeps/jobs/dep-1/dependencies; expect 200 '"queue":"t","id":"order-7","state":"ready","counted":"pending"'
req GET /v1/queues/t/jobs/order-7/dependencies; expect 200 '"dependents":.."queue":"zdeps","id":"dep-1"'
req POST /v1/queues/t/jobs/order-7/dependencies; expect 405
# its /metrics count it waiting (rjq_jobs' states, as rjq metrics), once a refresh read zdeps
for _ in $(seq 600); do
    req GET /metrics; [[ $BODY == *'rjq_jobs{queue="zdeps",state="waiting"} 1'* ]] && break; sleep 0.1
done
expect 200 'rjq_jobs\{queue="zdeps",state="waiting"\} 1'
req POST "/v1/queues/zdeps/jobs?after=t" --data d; expect 400 "dependency 't' is not QUEUE:ID"
req POST "/v1/queues/zdeps/jobs?after=t:x&wait=1" --data d; expect 400 'after cannot be used with wait'
req POST "/v1/queues/zdeps/jobs?after_policy=run" --data d; expect 400 'after_policy needs after'
req POST "/v1/queues/zdeps/jobs?after=t:x&after_policy=no" --data d; expect 400 'none of fail, run, ignore'

# ---- a short wait never loses the enqueue's answer ---------------------------------------
# With Redis stopped, every enqueue's reply comes after its wait ran out:
# each still gets 202 with its job's id (never 504), then the jobs exist.
kill -STOP "$redis_pid"
SHORT=()
for i in 1 2 3 4 5 6; do
    w=$(( i % 2 )) idq=; [ "$i" -gt 4 ] && idq="&id=short-$i"
    curl -s -D "$DIR/short$i.h" -o "$DIR/short$i.b" -X POST --data "s$i" "$MAIN/v1/queues/zshort/jobs?wait=$w$idq" &
    SHORT+=("$!")
done
PIDS+=("${SHORT[@]}")
for _ in $(seq 1200); do req GET /v1/server; [[ $BODY == *'"waiting":6,'* ]] && break; sleep 0.05; done
expect 200 '"waiting":6,'
kill -CONT "$redis_pid"
for p in "${SHORT[@]}"; do wait "$p"; done
for i in 1 2 3 4 5 6; do
    CODE=$(head -1 "$DIR/short$i.h" | cut -d' ' -f2) BODY=$(cat "$DIR/short$i.b") LAST="short wait $i"
    expect 202 '^\{"id":"[^"]+","finished":false,'
done
[[ $BODY == *'"id":"short-6"'* ]] || fail "short wait 6: $BODY"
req GET /v1/queues/zshort; expect 200 '"ready":6,'

# ---- reading --------------------------------------------------------------------------
req GET /v1/queues/t; expect 200 '"ready":3'
req GET /v1/queues/t/jobs?state=ready; expect 200 '"ids":\["order-7",'
req GET "/v1/queues/t/jobs?state=ready&offset=1&limit=1"; expect 200 "\"ids\":\\[\"$ID1\"\\]"
req GET /v1/queues/t/jobs?state=nope; expect 400 'state must be ready, delayed, waiting, active, dead, cancelled or completed'
req GET "/v1/queues/t/jobs?state=ready&limit=0"; expect 400 'limit'
req GET "/v1/queues/t/jobs/$ID1"; expect 200 '"payload":"hello"'
expect 200 '"enqueued_ms":[0-9]{13}[,}]'; expect 200 '"started_ms":null'
req GET /v1/queues/t/jobs/order-7; expect 200 '"max_attempts":2'
req GET /v1/queues/bin/jobs/b1; expect 200 '"payload":\{"base64":"//4AAQ=="\}'
req GET /v1/queues/t/jobs/nope; expect 404
for _ in $(seq 600); do # the registry listing serves t and bin within a refresh
    req GET /v1/queues; [[ $BODY == *'"name":"bin"'*'"name":"t"'* ]] && break
    sleep 0.1
done
expect 200 '"name":"bin".*"name":"t"'
req GET "/v1/queues?after=bin&limit=1"; expect 200 '^\{"queues":\[\{"name":"t"'

# ---- actions ---------------------------------------------------------------------------
req POST "/v1/queues/t/jobs/$ID1/cancel"; expect 200 '"from":"ready"'
req POST "/v1/queues/t/jobs/$ID1/cancel"; expect 409 '"state":"cancelled"'
req POST /v1/queues/t/jobs/nope/cancel; expect 404
req POST /v1/queues/t/jobs/order-7/replay; expect 409 'not dead'
req POST /v1/queues/t/jobs/nope/replay; expect 404
req DELETE /v1/queues/t/jobs/order-7; expect 409 'dead or cancelled'
req DELETE "/v1/queues/t/jobs/$ID1"; expect 200 '"deleted":1'
req DELETE "/v1/queues/t/jobs/$ID1"; expect 404
req POST /v1/queues/t/jobs/order-7/cancel; expect 200
req POST /v1/queues/t/purge; expect 400 'state=dead'
req POST "/v1/queues/t/purge?state=cancelled"; expect 200 '"deleted":1'
req GET /v1/queues/t/purge; expect 405
req POST /v1/queues/t/pause; expect 200 '"changed":true'
req POST /v1/queues/t/pause; expect 200 '"changed":false'
req GET /v1/queues/t; expect 200 '"paused":true'
req POST /v1/queues/t/resume; expect 200 '"changed":true'
req POST /v1/queues/t/reclaim; expect 200 '"reclaimed":0'
req POST /v1/queues/t/replay; expect 200 '"replayed":0'

# ---- hardening -----------------------------------------------------------------------------
before=$(keys)
req POST /v1/queues/t/pause -H 'Origin: http://evil.example' -H 'Content-Type: application/x-www-form-urlencoded'
expect 403 'cross-site'
req POST /v1/queues/t/jobs -H 'Sec-Fetch-Site: cross-site' --data x; expect 403 'cross-site'
CHECKS=$((CHECKS + 1)); [ "$(keys)" = "$before" ] || fail "a cross-site request wrote to Redis: $(diff <(echo "$before") <(keys) | head -5)"
req POST "/v1/queues/t/jobs?id=same-origin-1" -H "Origin: $MAIN" --data x; expect 201
req HEAD /v1/events; expect 200
req GET /v1/server; served=$(json "$BODY" "d['served']")
for i in 1 2 3; do req POST "/v1/queues/jobsbad$i/jobs?delay=bad" --data x; expect 400; done
req POST "/v1/queues/jobsbad4/jobs?id=1234" --data x; expect 400 'invalid job id'
req GET /v1/server; expect 200 "\"served\":$served,"   # refused requests open no queue
req POST "/v1/queues/t/jobs?id=%FFbin" --data x; expect 201 '"id":\{"base64":"/2Jpbg=="\}'
req GET "/v1/queues/t/jobs?state=ready"; expect 200 '\{"base64":"/2Jpbg=="\}'
# a queue made by another process is found at once, past 1500 names (not
# served) that sort just before it in the registry
redis-cli -p "$redis_port" eval "for i = 1, 1500 do redis.call('ZADD', KEYS[1], 0, 'lj' .. string.format('%05d', i)) end" 1 t:queues >/dev/null
"$RJQ" --prefix t enqueue lk x >/dev/null
req GET /v1/queues/lk; expect 200 '"ready":1'
redis-cli -p "$redis_port" eval "for i = 1, 1500 do redis.call('ZREM', KEYS[1], 'lj' .. string.format('%05d', i)) end" 1 t:queues >/dev/null

# ---- the event stream -------------------------------------------------------------------
curl -s -N "$MAIN/v1/events?queues=t" >"$DIR/sse" 2>/dev/null &
CURL=$!
PIDS+=("$CURL")
for _ in $(seq 600); do grep -q '^retry:' "$DIR/sse" && break; sleep 0.05; done
# (the enqueue's script publishes only while the queue's monitored flag is
# set: the server's monitor sets it once its subscription is confirmed,
# which the stream's first line does not wait for)
for _ in $(seq 600); do
    [ "$(redis-cli -p "$redis_port" exists 't:{t}:monitored')" = 1 ] && break; sleep 0.05
done
req POST "/v1/queues/t/jobs?id=seen-1" --data x; expect 201
for _ in $(seq 600); do grep -q '"event":"enqueued","id":"seen-1"' "$DIR/sse" && break; sleep 0.05; done
CHECKS=$((CHECKS + 1))
grep -q '^event: job$' "$DIR/sse" && grep -q '"event":"enqueued","id":"seen-1"' "$DIR/sse" ||
    fail "no job event on the stream: $(head -c 500 "$DIR/sse")"
for _ in $(seq 600); do grep -q '^event: stats$' "$DIR/sse" && break; sleep 0.05; done
CHECKS=$((CHECKS + 1)); grep -q '"name":"t","stats"' "$DIR/sse" || fail "no stats event on the stream"
CHECKS=$((CHECKS + 1)); grep -q '"queue":"w"' "$DIR/sse" && fail "the stream of queue t carried w"
req GET /v1/server; expect 200 '"streams":1'
kill "$CURL"; wait "$CURL" 2>/dev/null
for _ in $(seq 600); do req GET /v1/server; [[ $BODY == *'"streams":0'* ]] && break; sleep 0.05; done
expect 200 '"streams":0'
# events carry ids; a stream opened with Last-Event-ID gets what it missed
CHECKS=$((CHECKS + 1))
grep -B1 '^event: job$' "$DIR/sse" | grep -q '^id: [0-9a-f]*-[0-9]*$' || fail "a job event without an id: $(head -c 500 "$DIR/sse")"
LAST_ID=$(sed -n 's/^id: //p' "$DIR/sse" | tail -1)
req POST "/v1/queues/t/jobs?id=missed-1" --data x; expect 201
req POST "/v1/queues/t/jobs?id=missed-2" --data x; expect 201
curl -s -N -H "Last-Event-ID: $LAST_ID" "$MAIN/v1/events?queues=t" >"$DIR/sse2" 2>/dev/null &
CURL=$!
PIDS+=("$CURL")
for _ in $(seq 600); do grep -q '"id":"missed-2"' "$DIR/sse2" && break; sleep 0.05; done
kill "$CURL"; wait "$CURL" 2>/dev/null
CHECKS=$((CHECKS + 1))
grep -q '"event":"enqueued","id":"missed-1"' "$DIR/sse2" && grep -q '"event":"enqueued","id":"missed-2"' "$DIR/sse2" &&
    ! grep -q '^event: reset' "$DIR/sse2" && ! grep -q '"id":"seen-1"' "$DIR/sse2" ||
    fail "resume from $LAST_ID: $(head -c 800 "$DIR/sse2")"
MID=$(grep -B2 '"event":"enqueued","id":"missed-1"' "$DIR/sse2" | sed -n 's/^id: //p' | head -1)
CHECKS=$((CHECKS + 1))
[[ $MID == "${LAST_ID%-*}-"* && ${MID##*-} -gt ${LAST_ID##*-} ]] || fail "replayed event id '$MID' after '$LAST_ID'"
curl -s -N -H "Last-Event-ID: 0-1" "$MAIN/v1/events?queues=t" >"$DIR/sse3" 2>/dev/null &
CURL=$!
PIDS+=("$CURL")
for _ in $(seq 600); do grep -q '^event: reset' "$DIR/sse3" && break; sleep 0.05; done
kill "$CURL"; wait "$CURL" 2>/dev/null
CHECKS=$((CHECKS + 1))
grep -A1 '^event: reset' "$DIR/sse3" | grep -q '^data: {"last_event_id":"0-1"}' || fail "no reset for an unknown id: $(head -c 300 "$DIR/sse3")"

# ---- enqueue and wait, with a worker ------------------------------------------------------
[ -x "$WORKER" ] || { echo "FAIL: $WORKER not built"; exit 1; }
"$WORKER" -r "$redis_url" -P t w >"$DIR/worker.log" 2>&1 &
WK_PID=$!
PIDS+=("$WK_PID")
req POST "/v1/queues/w/jobs?wait=10000" --data abc; expect 200 '^done:abc$'; header_has "X-Job-Id:"
req POST "/v1/queues/w/jobs?wait=10000&attempts=1" --data fail-x; expect 502 '"error":"refused: fail-x"'
DEAD=$(json "$BODY" "d['id']")
req POST "/v1/queues/w/jobs?wait=200" --data sleep:4000:z; expect 202 '^\{"id":"[^"]+","finished":false,"detail":'
SLOW=$(sed -n 's/^{"id":"\([^"]*\)".*/\1/p' "$DIR/b") # (no python inside the job's 4 s)
req GET "/v1/queues/w/jobs/$SLOW"; expect 200 '"state":"active"'
req GET "/v1/queues/w/jobs?state=dead"; expect 200 "\"ids\":\\[\"$DEAD\"\\]"
req POST "/v1/queues/w/jobs/$DEAD/replay"; expect 200 '"replayed":1'
req POST "/v1/queues/w/jobs?wait=10000" --data-binary @"$DIR/limit"; expect 200 # result > body limit
for _ in $(seq 600); do # (timings start once the server watches w: after its first refresh)
    req POST "/v1/queues/w/jobs?wait=5000" --data timed
    req GET /metrics
    [[ $BODY == *'rjq_job_run_seconds_count{queue="w"} '[1-9]* &&
       $BODY == *'rjq_jobs_total{queue="w",outcome="completed"} '[1-9]* ]] && break
    sleep 0.1
done
expect 200 'rjq_jobs_total\{queue="w",outcome="completed"\} [1-9]'
expect 200 'rjq_job_wait_seconds_bucket\{queue="w",le="\+Inf"\} [1-9]'
expect 200 'rjq_job_run_seconds_count\{queue="w"\} [1-9]'
header_has "Content-Type: text/plain; version=0.0.4"
expect 200 'rjq_redis_can_evict_jobs 0'
req GET /v1/server; expect 200 '"redis_memory":\{"used_memory":[0-9]+,"maxmemory":0,"maxmemory_policy":"noeviction","can_evict_jobs":false\}'

# ---- the process registry: the worker, by the API and the CLI ------------------------------
for _ in $(seq 600); do
    req GET /v1/processes; [[ $BODY == *'"queue":"w","concurrency":100'* ]] && break; sleep 0.1
done
expect 200 '"queue":"w","concurrency":100,"running":[0-9]+'
req GET "/v1/processes?limit=0"; expect 400 'limit'
CHECKS=$((CHECKS + 1))
"$RJQ" --prefix t processes | grep -q "^  w concurrency 100 running" || fail "rjq processes: $("$RJQ" --prefix t processes 2>&1)"
CHECKS=$((CHECKS + 1))
"$RJQ" --prefix t processes --json | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert d[0]["queues"][0]["queue"] == "w"' ||
    fail "rjq processes --json"

# ---- a client that resets mid-wait; one that half-closes ----------------------------------
# The reset request waits 60 s on a queue nobody works: its await must end
# when the reset is seen, long before the job or the wait could end it.
HOSTPORT=${MAIN#http://}
"$PY" - "$HOSTPORT" "$DIR/rst" <<'PY'
import socket, struct, sys, time
host, port = sys.argv[1].rsplit(':', 1)
def server():
    c = socket.create_connection((host, int(port)))
    c.sendall(b'GET /v1/server HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    data = b''
    while True:
        d = c.recv(65536)
        if not d: return data
        data += d
body = b'rst'
s = socket.create_connection((host, int(port)))
s.sendall(b'POST /v1/queues/zrst/jobs?id=rst-1&wait=60000 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' % (len(body), body))
for _ in range(400):  # the request is held (its await made)
    if b'"awaits":1' in server(): break
    time.sleep(0.05)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
s.close()  # RST
h = socket.create_connection((host, int(port)))
body = b'half'
h.sendall(b'POST /v1/queues/w/jobs?wait=10000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s' % (len(body), body))
h.shutdown(socket.SHUT_WR)
data = b''
while True:
    d = h.recv(65536)
    if not d: break
    data += d
open(sys.argv[2], 'wb').write(data)
PY
CHECKS=$((CHECKS + 1))
grep -q "^HTTP/1.1 200 OK" "$DIR/rst" && grep -q "done:half" "$DIR/rst" || fail "half-closed client: $(head -c 300 "$DIR/rst")"
for _ in $(seq 1200); do req GET /v1/server; [[ $BODY == *'"waiting":0,"awaits":0'* ]] && break; sleep 0.05; done
expect 200 '"waiting":0,"awaits":0' # the reset request's await was cancelled (its job waits 60 s)
req GET /v1/queues/zrst/jobs/rst-1; expect 200 '"state":"ready"' # the job goes on

# ---- read-only and token modes -------------------------------------------------------------
start_serve ro --read-only
req GET /v1/queues/t; expect 200
req POST /v1/queues/t/jobs --data x; expect 403 'read-only'
req POST /v1/queues/t/pause; expect 403
req DELETE /v1/queues/t/jobs/x; expect 403
req GET /v1/server; expect 200 '"read_only":true'
kill -TERM "$SPID"; wait "$SPID"; RC=$?
CHECKS=$((CHECKS + 1)); [ "$RC" = 0 ] || fail "read-only server exit $RC: $(cat "$DIR/ro.err")"

printf 'short\n' >"$DIR/badtoken"
CHECKS=$((CHECKS + 1))
"$RJQ" serve --listen 127.0.0.1:0 --token-file "$DIR/badtoken" >/dev/null 2>"$DIR/bt.err" && fail "a short token was taken"
TOKEN=0123456789abcdef-token
printf '%s\n' "$TOKEN" >"$DIR/token"
start_serve tok --token-file "$DIR/token"
req GET /v1/queues/t; expect 401; header_has "WWW-Authenticate: Bearer"
req GET /v1/queues/t -H "Authorization: Bearer wrong-token-0123456"; expect 401
req GET /v1/queues/t -H "Authorization: Bearer $TOKEN"; expect 200
req GET "/v1/queues/t?access_token=$TOKEN"; expect 200
req GET /metrics; expect 401
req GET /healthz; expect 200
req GET /; expect 200 '<title>rjq'
kill -TERM "$SPID"; wait "$SPID"; RC=$?
CHECKS=$((CHECKS + 1)); [ "$RC" = 0 ] || fail "token server exit $RC: $(cat "$DIR/tok.err")"

# ---- --demo: the worker pool and its controls ---------------------------------------------------
start_serve demo --demo --queues 'demo'
DEMO_PID=$SPID
req GET /v1/demo; expect 200 '"size":0'
req POST "/v1/demo/pool?size=4&latency_ms=5&fail_pct=0&hang_pct=0"; expect 200 '"size":4'
req POST "/v1/demo/enqueue?kind=report&n=20"; expect 200 '"enqueued":20'
req POST "/v1/demo/enqueue?kind=nope"; expect 400 'kind'
req POST "/v1/demo/pool?fail_pct=101"; expect 400 'fail_pct'
for _ in $(seq 600); do req GET /v1/queues/demo; [[ $BODY == *'"completed":20,'* ]] && break; sleep 0.1; done
expect 200 '"completed":20,'
req GET /v1/demo; expect 200 '"done":20,'
req POST "/v1/demo/pool?fail_pct=100"; expect 200 '"fail_pct":100'
req POST "/v1/demo/enqueue?n=1"; expect 200
for _ in $(seq 600); do req GET /v1/queues/demo; [[ $BODY == *'"retried":1,'* ]] && break; sleep 0.1; done
expect 200 '"failed":1,"retried":1,' # failed, and retried after its backoff
req POST "/v1/demo/pool?size=0"; expect 200 '"size":0'
req POST "/v1/demo/pool?size=2&fail_pct=0&hang_pct=100"; expect 200
for _ in $(seq 600); do req GET /v1/demo; [[ $BODY == *'"hung":'[1-9]* ]] && break; sleep 0.1; done
expect 200 '"hung":[1-9]'
req POST /v1/demo/reclaim; expect 200 '"reclaimed":[0-9]+'
req GET /v1/queues/demo; failed_before=$(json "$BODY" "d['stats']['failed']")
kill -TERM "$DEMO_PID"; wait "$DEMO_PID"; RC=$? # with jobs hanging in its pool
CHECKS=$((CHECKS + 1)); [ "$RC" = 0 ] || fail "demo server exit $RC: $(tail -c 2000 "$DIR/demo.err")"
# the hung jobs went back to the queue at once, their attempt not counted
CHECKS=$((CHECKS + 1))
"$RJQ" --prefix t stats demo >"$DIR/demo.stats"
grep -qx "active 0" "$DIR/demo.stats" && grep -qx "failed $failed_before" "$DIR/demo.stats" &&
    ! grep -qx "ready 0" "$DIR/demo.stats" || fail "demo jobs at shutdown: $(tr '\n' ' ' <"$DIR/demo.stats")"
grep -q "handed back to their queue" "$DIR/demo.err" || fail "no hand-back said: $(tail -3 "$DIR/demo.err")"
start_serve demo-ro --demo --read-only
req POST "/v1/demo/enqueue?n=1"; expect 403
kill -TERM "$SPID"; wait "$SPID"
# hung jobs past their timeout (5 s) are found by the reclaim sweep and told
# so; the pool's completion is then refused: they never become "completed"
start_serve demo-hang --demo --queues 'demo'
req GET /v1/queues/demo; completed_before=$(json "$BODY" "d['stats']['completed']")
req POST "/v1/demo/pool?size=2&fail_pct=0&hang_pct=100"; expect 200
req POST "/v1/demo/enqueue?n=2"; expect 200
for _ in $(seq 300); do req POST /v1/demo/reclaim; [[ $BODY =~ '"reclaimed":'[1-9] ]] && break; sleep 0.1; done
expect 200 '"reclaimed":[1-9]'
for _ in $(seq 600); do req GET /v1/demo; [[ $BODY == *'"dropped":'[1-9]* ]] && break; sleep 0.1; done
expect 200 '"dropped":[1-9]'
req GET /v1/queues/demo; expect 200 "\"completed\":$completed_before,"
kill -TERM "$SPID"; wait "$SPID"

# ---- bounds: --max-waiting (429), --max-requests (503) -----------------------------------------
start_serve bounded --max-waiting 1 --max-requests 2
req POST /v1/queues/bq/jobs --data x; expect 201
req POST /v1/queues/bq/jobs --data y; expect 429 'full'; header_has "Retry-After: 1"
curl -s -o /dev/null -X POST --data z "$BASE/v1/queues/bw1/jobs?wait=20000" &
C1=$!
curl -s -o /dev/null -X POST --data z "$BASE/v1/queues/bw2/jobs?wait=20000" &
C2=$!
PIDS+=("$C1" "$C2")
for _ in $(seq 600); do req GET /v1/server; [[ $BODY == *'"waiting":2'* ]] && break; sleep 0.05; done
expect 200 '"waiting":2'
req POST "/v1/queues/bw3/jobs?wait=1000" --data z; expect 503 'max-requests'
kill -TERM "$SPID"; wait "$SPID"; RC=$?
CHECKS=$((CHECKS + 1)); [ "$RC" = 0 ] || fail "bounded server exit $RC: $(cat "$DIR/bounded.err")"

# ---- --max-queues bounds the queues watched at once; idle ones are let go (--queue-idle) ----
SERVE_PREFIX=idle # (its own prefix: MONITOR tells its commands apart)
start_serve idle --max-queues 2 --queue-idle 2000 # (long enough that ia and ib are still served when ic comes, under load)
SERVE_PREFIX=t
req GET /v1/queues; expect 200 '^\{"queues":\[\]\}$' # (none served: under UBSan, no qsort of NULL)
req POST /v1/queues/ia/jobs --data x; expect 201
req POST /v1/queues/ib/jobs --data x; expect 201
req POST /v1/queues/ic/jobs --data x; expect 503 'max-queues'
wait_served 0
expect 200 '"served":0,' # nobody named or watched them since: let go
req POST /v1/queues/ic/jobs --data x; expect 201 # so a new name is served
req GET /v1/queues/ia; expect 200 '"ready":1,' # and an old one again
# a stream watching ia keeps it (and only it) served
curl -s -N "$BASE/v1/events?queues=ia&jobs=0" >"$DIR/idle.sse" 2>/dev/null &
ICURL=$!
PIDS+=("$ICURL")
for _ in $(seq 600); do grep -q '^retry:' "$DIR/idle.sse" && break; sleep 0.05; done
wait_served 1
expect 200 '"served":1,'
wait_refreshes
expect 200 '"served":1,' # (3 refreshes later: still watched)
kill "$ICURL"; wait "$ICURL" 2>/dev/null
wait_served 0
expect 200 '"served":0,'
# nothing watched: none of the queues' keys is sent to Redis, refresh after refresh
redis-cli -p "$redis_port" monitor >"$DIR/idle.mon" 2>/dev/null &
MON=$!
PIDS+=("$MON")
for _ in $(seq 600); do grep -q '^OK' "$DIR/idle.mon" && break; sleep 0.05; done
req GET /v1/server; wait_refreshes
kill "$MON"; wait "$MON" 2>/dev/null
CHECKS=$((CHECKS + 1))
grep -q '"idle:{' "$DIR/idle.mon" && fail "queues nobody watches still cost Redis commands: $(grep '"idle:{' "$DIR/idle.mon" | head -3)"
kill -TERM "$SPID"; wait "$SPID"; RC=$?
CHECKS=$((CHECKS + 1)); [ "$RC" = 0 ] || fail "idle server exit $RC: $(cat "$DIR/idle.err")"

# ---- an idle queue's handle is closed with it: the names ever seen cost nothing (issue 31, 12) ----
# Before, every name kept its rjq handle until the server stopped, and past
# 100 handles per --max-queues every new name was refused with 503. (No
# check that falls between two refreshes: each waits for what it checks.)
idle_queue_handles_are_closed() {
    local round name
    SERVE_PREFIX=idleh
    start_serve idleh --max-queues 2 --queue-idle 300
    SERVE_PREFIX=t
    for round in 1 2 3; do
        for name in "h${round}a" "h${round}b"; do
            req POST "/v1/queues/$name/jobs" --data x; expect 201
        done
        wait_served 0
        expect 200 '"served":0,'
        expect 200 '"handles":0,' # (closed as they were let go: none kept per name)
    done
    # nothing served: refresh after refresh, none of their keys is sent to
    # Redis (MONITOR: the other servers of this file share the Redis)
    local mon
    redis-cli -p "$redis_port" monitor >"$DIR/idleh.mon" 2>/dev/null &
    mon=$!
    PIDS+=("$mon")
    for _ in $(seq 600); do grep -q '^OK' "$DIR/idleh.mon" && break; sleep 0.05; done
    req GET /v1/server; wait_refreshes
    kill "$mon"; wait "$mon" 2>/dev/null
    CHECKS=$((CHECKS + 1))
    grep -q '"idleh:{' "$DIR/idleh.mon" && fail "queues let go still cost Redis commands: $(grep '"idleh:{' "$DIR/idleh.mon" | head -3)"
    req GET /v1/queues/h1a; expect 200 '"ready":1,' # an old name opened again works
    req GET /v1/server
    CHECKS=$((CHECKS + 1))
    [ "$(sed -n 's/.*"served":\([0-9]*\).*/\1/p' <<<"$BODY")" = "$(sed -n 's/.*"handles":\([0-9]*\).*/\1/p' <<<"$BODY")" ] ||
        fail "a handle per queue served, no more: $BODY"
    kill -TERM "$SPID"; wait "$SPID"; RC=$?
    CHECKS=$((CHECKS + 1)); [ "$RC" = 0 ] || fail "idleh server exit $RC: $(cat "$DIR/idleh.err")"
}
idle_queue_handles_are_closed

# ---- --request-timeout: 408 for a request that does not arrive whole ----------------------------
# (1.5 s: a trickled header, a partial body, a request pipelined behind a
# wait that outlasts the deadline get 408 and a close; a slow request that
# ends in time, a wait and an event stream longer than it, and an idle
# kept-alive connection are left alone)
start_serve deadline --request-timeout 1500
"$PY" - "${BASE#http://}" "$DIR/deadline" <<'PY'
import socket, struct, sys, threading, time
host, port = sys.argv[1].rsplit(':', 1)
out = {}

def conn():
    return socket.create_connection((host, int(port)))

def read_all(s, limit):
    s.settimeout(0.2)
    data, end = b'', time.time() + limit
    while time.time() < end:
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if not d:
            return data, True
        data += d
    return data, False

def trickle():  # a header trickled a byte at a time, for good
    s = conn(); t0 = time.time()
    s.sendall(b'GET /healthz HTTP/1.1\r\nHost: x\r\n')
    s.settimeout(0.25)
    data, closed = b'', False
    while time.time() - t0 < 8 and not closed:
        try: s.sendall(b'X')
        except OSError: pass
        try:
            d = s.recv(4096)
            if d: data += d
            else: closed = True
        except socket.timeout: pass
        except OSError: closed = True
    out['trickle'] = (data.split(b'\r\n')[0], closed, time.time() - t0)

def partial_body():  # 10 of 100 bytes, then nothing
    s = conn(); t0 = time.time()
    s.sendall(b'POST /v1/queues/dl/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789')
    data, closed = read_all(s, 8)
    out['body'] = (data.split(b'\r\n')[0], closed, time.time() - t0)

def slow_ok():  # a whole request over ~1 s: answered
    s = conn(); req = b'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'
    for i in range(len(req)):
        s.sendall(req[i:i + 1]); time.sleep(1.0 / len(req))
    data, _ = read_all(s, 3)
    out['slow'] = data.split(b'\r\n')[0]

def long_wait_then_pipelined():  # a 3 s wait; a partial request behind it, sent with it and later
    s = conn(); t0 = time.time()
    s.sendall(b'POST /v1/queues/dl/jobs?wait=3000 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nw'
              b'GET /healthz HTTP/1.1\r\n')
    time.sleep(0.5)
    s.sendall(b'Host: x\r\n')  # (while the wait is answered: no clock runs yet)
    data, closed = read_all(s, 9)
    lines = [l.rstrip(b'\r') for l in data.split(b'\n') if l.startswith(b'HTTP/1.1 ')]
    out['pipelined'] = (lines, closed, time.time() - t0)

def idle_keepalive():  # a whole request, then silence past the deadline
    s = conn()
    s.sendall(b'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
    first, _ = read_all(s, 1)
    more, closed = read_all(s, 3)
    out['idle'] = (first.split(b'\r\n')[0], more, closed)

def stream():  # an event stream open past the deadline (bytes sent on it meanwhile)
    s = conn()
    s.sendall(b'GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n')
    time.sleep(0.5)
    s.sendall(b'GET /healthz HTTP/1.1\r\n')
    data, closed = read_all(s, 3.5)
    out['stream'] = (data.split(b'\r\n')[0], closed)

def reset(path):  # a connection dropped (RST) while its answer streams or waits
    s = conn()
    s.sendall(b'GET %s HTTP/1.1\r\nHost: x\r\n\r\n' % path)
    time.sleep(0.3)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    s.close()
    time.sleep(0.3)

ts = [threading.Thread(target=f) for f in (trickle, partial_body, slow_ok, long_wait_then_pipelined,
                                           idle_keepalive, stream)]
for t in ts: t.start()
for t in ts: t.join()
# Then one at a time, so that each new connection gets the descriptor (and
# likely the bufferevent's memory) of the one reset before it: its state
# must not be inherited (a trickle timed out once, a stream left alone).
first = {k: out[k] for k in ('trickle', 'stream')}
reset(b'/v1/events'); trickle(); out['trickle_after_reset'] = out['trickle']
reset(b'/v1/events'); stream(); out['stream_after_reset'] = out['stream']
out.update(first)
with open(sys.argv[2], 'w') as f:
    for k in sorted(out): f.write('%s %r\n' % (k, out[k]))
PY
CHECKS=$((CHECKS + 1))
check_line() { grep -q -- "$2" "$DIR/deadline" || fail "request-timeout, $1: $(grep "^$1 " "$DIR/deadline")"; }
check_line trickle "^trickle (b'HTTP/1.1 408 Request Timeout', True, [1-3]\."
check_line body "^body (b'HTTP/1.1 408 Request Timeout', True, [1-3]\."
check_line slow "^slow b'HTTP/1.1 200 OK'"
# the wait's 202 after 3 s, then the pipelined partial request's 408 1.5 s later
check_line pipelined "^pipelined (\[b'HTTP/1.1 202 Accepted', b'HTTP/1.1 408 Request Timeout'\], True, [4-6]\."
check_line idle "^idle (b'HTTP/1.1 200 OK', b'', False)"
check_line stream "^stream (b'HTTP/1.1 200 OK', False)"
check_line trickle_after_reset "^trickle_after_reset (b'HTTP/1.1 408 Request Timeout', True, [1-2]\."
check_line stream_after_reset "^stream_after_reset (b'HTTP/1.1 200 OK', False)"
req GET /v1/server; expect 200 '"timed_out":4'
req GET /metrics; expect 200 'rjq_serve_request_timeouts_total 4'
kill -TERM "$SPID"; wait "$SPID"; RC=$?
CHECKS=$((CHECKS + 1)); [ "$RC" = 0 ] || fail "deadline server exit $RC: $(cat "$DIR/deadline.err")"

# ---- SIGTERM: a waiting request gets 202 with its job's id; exit 0 -----------------------------
BASE=$MAIN
curl -s -D "$DIR/wait.h" -o "$DIR/wait.b" -X POST --data never "$MAIN/v1/queues/t/jobs?wait=30000" &
CW=$!
for _ in $(seq 600); do req GET /v1/server; [[ $BODY == *'"waiting":1'* ]] && break; sleep 0.05; done

# ---- SIGTERM: exit 0 -------------------------------------------------------------------------
kill -TERM "$MAIN_PID"; wait "$MAIN_PID"; RC=$?
CHECKS=$((CHECKS + 1)); [ "$RC" = 0 ] || fail "server exit $RC: $(tail -c 2000 "$DIR/main.err")"
wait "$CW"
CHECKS=$((CHECKS + 1))
head -1 "$DIR/wait.h" | grep -q " 202 " && grep -q '"id":' "$DIR/wait.b" ||
    fail "a wait at shutdown: $(head -1 "$DIR/wait.h") $(cat "$DIR/wait.b")"

# ---- SIGTERM with Redis gone: the stop is bounded, exit 0 (the last check: Redis stays down) -------
start_serve stuck --demo
req POST "/v1/demo/pool?size=2&latency_ms=30000&fail_pct=0&hang_pct=0"; expect 200
req POST "/v1/demo/enqueue?n=2"; expect 200
for _ in $(seq 600); do req GET /v1/demo; [[ $BODY == *'"running":2'* ]] && break; sleep 0.05; done
expect 200 '"running":2'
curl -s -N "$BASE/v1/events?jobs=0" >"$DIR/down.sse" 2>/dev/null &
PIDS+=("$!")
for _ in $(seq 600); do grep -q '^data: {"redis":true,' "$DIR/down.sse" && break; sleep 0.05; done
CHECKS=$((CHECKS + 1)); grep -q '^data: {"redis":true,' "$DIR/down.sse" || fail "no server event on the stream: $(head -c 300 "$DIR/down.sse")"
kill -TERM "$WK_PID"; wait "$WK_PID" # (a worker stopping waits for Redis to deregister it)
redis_private_stop
# Redis down: the probe, the API and the streams say so
for _ in $(seq 1200); do req GET /healthz; [ "$CODE" = 503 ] && break; sleep 0.05; done
expect 503 '"redis":false'
req GET /v1/queues; expect 503 'redis unavailable'; header_has "Retry-After: 1"
req GET /v1/queues/demo; expect 503 'redis unavailable'
req GET /v1/server; expect 200 '"redis":false'
for _ in $(seq 600); do grep -q '^data: {"redis":false,' "$DIR/down.sse" && break; sleep 0.05; done
CHECKS=$((CHECKS + 1)); grep -B1 -E '^data: \{"redis":false,"down_since_ms":[0-9]{13},' "$DIR/down.sse" | grep -q '^event: server' || fail "no redis-down event: $(tail -c 300 "$DIR/down.sse")"
kill -TERM "$SPID"
for _ in $(seq 300); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.05; done
CHECKS=$((CHECKS + 1))
kill -0 "$SPID" 2>/dev/null && fail "a server whose Redis is gone did not stop within 15 s"
wait "$SPID"; RC=$?
CHECKS=$((CHECKS + 1)); [ "$RC" = 0 ] || fail "stuck server exit $RC: $(tail -c 1500 "$DIR/stuck.err")"

echo "$CHECKS checks, $FAILURES failures"
[ "$FAILURES" = 0 ]
