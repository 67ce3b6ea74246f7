#!/usr/bin/env bash
# rjq serve copies a request's W3C trace context (traceparent, tracestate)
# into the job it enqueues, and GET /v1/queues/{q}/jobs/{id} returns the
# job's headers ({} for a job without); a traceparent that can be no job
# header (not printable ASCII) is ignored, the job enqueued all the same.
set -u
BUILD=${RJQ_BUILD:?RJQ_BUILD must name the build directory}
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
RJQ="$BUILD/rjq"
PY=/usr/bin/python3
[ -x "$RJQ" ] || { echo "FAIL: $RJQ not built"; exit 1; }
if "$RJQ" serve --listen x 2>&1 | grep -q "built without"; then
    echo "SKIP: rjq was built without serve (libjansson-dev)"; exit 0
fi
command -v curl >/dev/null || { echo "FAIL: curl is needed (scripts/install-deps.sh)"; exit 1; }
[ -x "$PY" ] || { echo "FAIL: /usr/bin/python3 is needed (scripts/install-deps.sh)"; exit 1; }
# shellcheck source=scripts/redis-private.sh
. "$SRC/scripts/redis-private.sh"
# shellcheck source=tests/serve_helpers.bash
. "$SRC/tests/serve_helpers.bash"
SERVE_PREFIX=pt
serve_setup serve-traces
FAILURES=0
fail() { FAILURES=$((FAILURES + 1)); echo "FAIL: $*"; }

start_serve main --queues 't*'
TP=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
TS='rojo=00f067aa0ba902b7,congo=t61rcWkgMzE'

# post ID [curl args]: enqueue a job of that id; its JSON into $DIR/ID.json
post() {
    local id=$1; shift
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data x "$@" "$BASE/v1/queues/t1/jobs?id=$id")
    [ "$code" = 201 ] || { fail "enqueue $id: $code"; return; }
    code=$(curl -s -o "$DIR/$id.json" -w '%{http_code}' "$BASE/v1/queues/t1/jobs/$id")
    [ "$code" = 200 ] || fail "read $id: $code"
}
post traced -H "traceparent: $TP" -H "tracestate: $TS"
post plain
post parent-only -H "traceparent: $TP"
post bad -H $'traceparent: 00-\xc3\xa9'

"$PY" - "$DIR" "$TP" "$TS" <<'PY' || fail "job headers"
import json, sys
d, tp, ts = sys.argv[1:]
def headers(id):
    return json.load(open('%s/%s.json' % (d, id)))['headers']
assert headers('traced') == {'traceparent': tp, 'tracestate': ts}, headers('traced')
assert headers('plain') == {}, headers('plain')
assert headers('parent-only') == {'traceparent': tp}, headers('parent-only')
assert headers('bad') == {}, headers('bad')
PY
stop_serve_clean main || FAILURES=$((FAILURES + 1))
[ "$FAILURES" = 0 ] && echo PASS
exit "$FAILURES"
