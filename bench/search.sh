#!/usr/bin/env bash
# A payload search over N jobs (default 1 000 000) through rjq serve
# (bench/README.md "Search"), on loopback, everything private:
#
#   1. N ready jobs, ~70-byte JSON payloads, every (N/100)-th holding
#      "needle" (100 matches), enqueued with `rjq enqueue Q -`;
#   2. with SLOWLOG recording every command, a search for each count of
#      COUNTS (payloads a step): time to
#      first result, total time, steps, and each step's Redis time (the
#      search script's FCALL/EVALSHA entries of SLOWLOG: p50, p99, max);
#   3. a worker (rjq-gateway_worker, completes at once) drains the queue:
#      jobs completed per second over DRAIN_S seconds without a search, then
#      while a search runs (the search's own time), repeated until it ends;
#   4. the index of declared JSON fields: the same N jobs enqueued into a
#      queue that declared `rjq index qi customer_id` (before its first
#      job), against the plain queue's enqueue of part 1: Redis commands
#      (INFO commandstats) and Redis main-thread CPU (INFO cpu) per job;
#      then lookups of customer_id values (200 jobs each): `rjq find` and
#      the serve search by the field (index), against the same search on the
#      plain queue (no index: a scan for the value, count 1000), with each
#      lookup's Redis time (SLOWLOG of the index script).
#
#   bash bench/search.sh [BUILD_DIR]     N=100000 COUNTS="100 200" COUNT=100 bash bench/search.sh
#   PARTS="index" bash bench/search.sh   (parts: scan, drain, index; default all)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
B=$(cd "${1:-$here/../build}" && pwd)
N=${N:-1000000}
COUNT=${COUNT:-100}                # the drain part's search
COUNTS=${COUNTS:-"50 100 200 1000"} # the searches without a drain
DRAIN_S=${DRAIN_S:-5}
PARTS=${PARTS:-"scan drain index"}
PY=/usr/bin/python3
# shellcheck source=scripts/redis-private.sh
. "$here/../scripts/redis-private.sh"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rjq-bench-search.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    redis_private_stop
    rm -rf "$DIR"
}
trap cleanup EXIT
cp "$B/rjq" "$B/rjq-gateway_worker" "$DIR/"
redis_private_start "$DIR"
RC() { redis-cli -p "$redis_port" "$@"; }
export RJQ_URL=$redis_url
P=bs

every=$((N / 100))
# the server's counters: every command run (scripts' included), and the
# main thread's CPU seconds
calls() { RC info commandstats | awk -F'[=,:]' '/^cmdstat_/ { s += $3 } END { print s }'; }
cpu() { RC info cpu | awk -F: '/^used_cpu_(sys|user)_main_thread:/ { s += $2 } END { print s }'; }
k0=$(calls); u0=$(cpu)
t0=$(date +%s.%N)
awk -v n="$N" -v e="$every" 'BEGIN { for (i = 0; i < n; i++)
    if (i % e == e - 1) printf "{\"kind\":\"mail\",\"customer_id\":%d,\"to\":\"needle-%d@example.com\"}\n", i % 5000, i;
    else printf "{\"kind\":\"mail\",\"customer_id\":%d,\"to\":\"user-%d@example.com\"}\n", i % 5000, i }' |
    "$DIR/rjq" --prefix $P enqueue q - >/dev/null
t1=$(date +%s.%N)
k1=$(calls); u1=$(cpu)
echo "enqueued $N jobs in $("$PY" -c "print(round($t1 - $t0, 1))") s; used_memory $(RC info memory | sed -n 's/^used_memory_human://p' | tr -d '\r')"
echo "  Redis per job: $("$PY" -c "print(round(($k1 - $k0) / $N, 3))") commands, $("$PY" -c "print(round(($u1 - $u0) * 1e6 / $N, 2))") us of main-thread CPU"

"$DIR/rjq" --prefix $P serve --listen 127.0.0.1:0 >"$DIR/serve.out" 2>"$DIR/serve.err" &
PIDS+=($!)
for _ in $(seq 200); do grep -q "^listening on" "$DIR/serve.out" 2>/dev/null && break; sleep 0.05; done
BASE="http://$(sed -n 's/^listening on //p' "$DIR/serve.out")"
for _ in $(seq 200); do [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/healthz")" = 200 ] && break; sleep 0.05; done

# search SECONDS_LABEL: start one, poll until over; prints its final status JSON
search() {
    local sid body
    sid=$(curl -s -X POST "$BASE/v1/queues/q/search?text=needle&count=${1:-$COUNT}" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["search"])')
    for _ in $(seq 100000); do
        body=$(curl -s "$BASE/v1/queues/q/search/$sid?from=100000")
        [[ $body == *'"state":"running"'* ]] || break
        sleep 0.05
    done
    echo "$body"
}

for c in $COUNTS; do
[[ " $PARTS " == *" scan "* ]] || break
RC config set slowlog-log-slower-than 0 >/dev/null
RC config set slowlog-max-len 100000 >/dev/null
RC slowlog reset >/dev/null
S=$(search "$c")
RC --json slowlog get 100000 >"$DIR/slowlog.txt"
RC config set slowlog-log-slower-than 10000 >/dev/null
"$PY" - "$S" "$DIR/slowlog.txt" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
print(f"search (no drain): state {d['state']}, found {d['found']}, scanned {d['scanned']} of {d['total']}, "
      f"steps {d['steps']}, count {d['count']}, first result {d['first_match_ms']} ms, total {d['elapsed_ms']} ms, "
      f"step round trip mean {d['step_ms_mean']:.3f} ms, max {d['step_ms_max']:.3f} ms")
# SLOWLOG (redis-cli --json): [id, time, usec, [args...], addr, name]; the
# search script's calls are FCALL rjq_<version>_search
usec = [e[2] for e in json.loads(open(sys.argv[2], 'rb').read().decode('utf-8', 'replace')) if len(e[3]) > 1 and str(e[3][1]).endswith('_search')]
usec.sort()
if usec:
    q = lambda p: usec[min(len(usec) - 1, int(p * len(usec)))]
    print(f"Redis time per step (SLOWLOG, {len(usec)} steps): p50 {q(0.5)} us, p99 {q(0.99)} us, max {usec[-1]} us, "
          f"mean {sum(usec) / len(usec):.0f} us")
else:
    print("no search step in SLOWLOG (format?)")
PYEOF

done

# ---- 4. the index ------------------------------------------------------------
if [[ " $PARTS " == *" index "* ]]; then
"$DIR/rjq" --prefix $P index qi customer_id --create >/dev/null
k0=$(calls); u0=$(cpu); t0=$(date +%s.%N)
awk -v n="$N" -v e="$every" 'BEGIN { for (i = 0; i < n; i++)
    if (i % e == e - 1) printf "{\"kind\":\"mail\",\"customer_id\":%d,\"to\":\"needle-%d@example.com\"}\n", i % 5000, i;
    else printf "{\"kind\":\"mail\",\"customer_id\":%d,\"to\":\"user-%d@example.com\"}\n", i % 5000, i }' |
    "$DIR/rjq" --prefix $P enqueue qi - >/dev/null
t1=$(date +%s.%N); k1=$(calls); u1=$(cpu)
echo "index: enqueued $N jobs into qi (index customer_id) in $("$PY" -c "print(round($t1 - $t0, 1))") s; used_memory $(RC info memory | sed -n 's/^used_memory_human://p' | tr -d '\r')"
echo "  Redis per job: $("$PY" -c "print(round(($k1 - $k0) / $N, 3))") commands, $("$PY" -c "print(round(($u1 - $u0) * 1e6 / $N, 2))") us of main-thread CPU"
"$DIR/rjq" --prefix $P index qi
RC config set slowlog-log-slower-than 0 >/dev/null
RC config set slowlog-max-len 100000 >/dev/null
RC slowlog reset >/dev/null
for v in 42 4242 777; do
    t0=$(date +%s.%N)
    n=$("$DIR/rjq" --prefix $P find qi customer_id $v | wc -l)
    t1=$(date +%s.%N)
    echo "rjq find qi customer_id $v: $n jobs in $("$PY" -c "print(round(($t1 - $t0) * 1000, 1))") ms (the whole command: process start, connect, lookup)"
done
RC --json slowlog get 100000 >"$DIR/slowlog.txt"
"$PY" - "$DIR/slowlog.txt" <<'PYEOF'
import json, sys
usec = sorted(e[2] for e in json.loads(open(sys.argv[1], 'rb').read().decode('utf-8', 'replace')) if len(e[3]) > 1 and str(e[3][1]).endswith('_index'))
print(f"index lookups' Redis time (SLOWLOG, {len(usec)} calls): {usec} us")
PYEOF
RC config set slowlog-log-slower-than 10000 >/dev/null
# through serve: by the index (qi) and by a scan (q, no index declared)
search_on() { # QUEUE QUERY
    local sid body
    sid=$(curl -s -X POST "$BASE/v1/queues/$1/search?$2" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["search"])')
    for _ in $(seq 100000); do
        body=$(curl -s "$BASE/v1/queues/$1/search/$sid?from=100000")
        [[ $body == *'"state":"running"'* ]] || break
        sleep 0.02
    done
    echo "$body"
}
for qq in qi q; do
    S=$(search_on $qq "field=customer_id&text=4242&count=1000")
    "$PY" - "$S" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
print(f"serve search {d['queue']} customer_id=4242: {'index' if d['index']['used'] else 'scan'} ({d['index']['note']}), "
      f"state {d['state']}, found {d['found']}, steps {d['steps']}, first result {d['first_match_ms']} ms, total {d['elapsed_ms']} ms")
PYEOF
done
fi

[[ " $PARTS " == *" drain "* ]] || exit 0
# the drain: rate without a search, then during searches
"$DIR/rjq-gateway_worker" -r "$redis_url" -P $P -c 100 q >"$DIR/worker.log" 2>&1 &
PIDS+=($!)
completed() { curl -s "$BASE/v1/queues/q" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["stats"]["completed"])'; }
sleep 2 # the worker up and draining (not measured)
c0=$(completed); t0=$(date +%s.%N); sleep "$DRAIN_S"; c1=$(completed); t1=$(date +%s.%N)
without=$("$PY" -c "print(round(($c1 - $c0) / ($t1 - $t0)))")
c0=$(completed); t0=$(date +%s.%N); S2=$(search); c1=$(completed); t1=$(date +%s.%N)
during=$("$PY" -c "print(round(($c1 - $c0) / ($t1 - $t0)))")
c0=$(completed); t0=$(date +%s.%N); sleep "$DRAIN_S"; c1=$(completed); t1=$(date +%s.%N)
after=$("$PY" -c "print(round(($c1 - $c0) / ($t1 - $t0)))")
"$PY" - "$S2" <<'PYEOF'
import json, sys
d = json.loads(sys.argv[1])
print(f"search (while draining): state {d['state']}, found {d['found']}, scanned {d['scanned']} of {d['total']}, "
      f"steps {d['steps']}, first result {d['first_match_ms']} ms, total {d['elapsed_ms']} ms, "
      f"step round trip mean {d['step_ms_mean']:.3f} ms, max {d['step_ms_max']:.3f} ms")
PYEOF
echo "drain: $without jobs/s without a search, $during jobs/s during it, $after jobs/s after"
