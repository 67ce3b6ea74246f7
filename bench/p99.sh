#!/bin/bash
# bench/p99.sh: the awaited job's latency percentiles, rjq against
# bee-queue, per payload size, in one run (issue 36: "at 16 KiB p99 <=
# bee-queue's"; bench/README.md "The 16 KiB awaited job's tail").
#
# Starts a private redis-server, then for each size and each of REPS
# rounds runs, alternating, `rjq-bench latency` and the peers'
# `bench_beequeue.js latency` (both: RATE awaited jobs/s for SECS s, a
# worker of concurrency 50 in another process, FLUSHALL before each) and
# prints every run's p50/p90/p99/max and, per size, the median of the
# rounds' p99 and its ratio to bee-queue's. Wall-clock figures: run it on
# a quiet machine (the load average at the start and the end is printed:
# above ~1 on 2 cores the tail is the scheduler's, not the queue's).
#
# Usage: bench/p99.sh [SIZE...]     sizes in bytes (default: 18 1024 16384)
# Environment:
#   RJQ_BENCH  the rjq-bench binary (build/rjq-bench: `make build`)
#   PEERS      the peer harness with its node_modules (default: a copy of
#              /work/shared/peers under $OUT/peers, `npm install`ed once);
#              SKIP_BEE=1: rjq only
#   REPS (3), RATE (1000), SECS (10), CONC (50), PORT (17470), OUT (mktemp)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
RJQ_BENCH=${RJQ_BENCH:-$root/build/rjq-bench}
REPS=${REPS:-3}
PORT=${PORT:-17470}
OUT=${OUT:-$(mktemp -d /tmp/rjq-p99.XXXXXX)}
SHARED_PEERS=${SHARED_PEERS:-/work/shared/peers}
export RATE=${RATE:-1000} SECS=${SECS:-10} CONC=${CONC:-50} REDIS_PORT=$PORT
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$RJQ_BENCH" ] || { echo "p99.sh: no $RJQ_BENCH (make build)" >&2; exit 1; }

sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(18 1024 16384)

if [ "${SKIP_BEE:-0}" != 1 ] && [ -z "${PEERS:-}" ]; then
  PEERS=$OUT/peers
  if [ ! -d "$PEERS/node_modules" ]; then
    rm -rf "$PEERS"
    cp -r "$SHARED_PEERS" "$PEERS"
    chmod -R u+w "$PEERS"
    (cd "$PEERS" && npm install --no-audit --no-fund > "$OUT/npm.log" 2>&1) ||
      { echo "p99.sh: npm install of the peers failed: $OUT/npm.log" >&2; exit 1; }
  fi
fi

if redis-cli -p "$PORT" ping > /dev/null 2>&1; then
  echo "p99.sh: a server already answers on port $PORT (PORT): not ours, pick another" >&2
  exit 1
fi
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$OUT/redis.pid" --logfile "$OUT/redis.log" --dir "$OUT"
stop() { [ -f "$OUT/redis.pid" ] && kill "$(cat "$OUT/redis.pid")" 2> /dev/null || true; }
trap stop EXIT
rm -f "$OUT/p99s"
for _ in $(seq 100); do redis-cli -p "$PORT" ping > /dev/null 2>&1 && break; sleep 0.1; done

# "p50 p90 p99 max ok" of a JSON line
fields() {
  /usr/bin/python3 -c 'import json,sys
j=json.loads(sys.stdin.read().strip().splitlines()[-1])
print("%.3f %.3f %.3f %.3f %s" % (j["p50_ms"], j["p90_ms"], j["p99_ms"], j["max_ms"], j["ok"]))'
}

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), RATE=$RATE/s SECS=$SECS CONC=$CONC REPS=$REPS, output in $OUT"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
echo
echo "| bytes | round | lib | p50 ms | p90 ms | p99 ms | max ms | ok |"
echo "|---:|---:|---|---:|---:|---:|---:|---|"
for b in "${sizes[@]}"; do
  for r in $(seq "$REPS"); do
    redis-cli -p "$PORT" flushall > /dev/null
    PAYLOAD_BYTES=$b "$RJQ_BENCH" latency > "$OUT/rjq-$b-$r.json" 2> "$OUT/rjq-$b-$r.err" || true
    read -r p50 p90 p99 max ok < <(fields < "$OUT/rjq-$b-$r.json")
    echo "| $b | $r | rjq | $p50 | $p90 | $p99 | $max | $ok |"
    echo "$b rjq $p99" >> "$OUT/p99s"
    [ "${SKIP_BEE:-0}" = 1 ] && continue
    redis-cli -p "$PORT" flushall > /dev/null
    (cd "$PEERS" && PAYLOAD_BYTES=$b node bench_beequeue.js latency > "$OUT/bee-$b-$r.json" 2> "$OUT/bee-$b-$r.err") || true
    read -r p50 p90 p99 max ok < <(fields < "$OUT/bee-$b-$r.json")
    echo "| $b | $r | bee-queue | $p50 | $p90 | $p99 | $max | $ok |"
    echo "$b bee $p99" >> "$OUT/p99s"
  done
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| bytes | rjq p99 ms (median of $REPS) | bee-queue p99 ms (median) | rjq / bee-queue |"
echo "|---:|---:|---:|---:|"
/usr/bin/python3 - "$OUT/p99s" "${sizes[@]}" << 'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for b in sys.argv[2:]:
    med = {}
    for lib in ("rjq", "bee"):
        v = [float(x[2]) for x in rows if x[0] == b and x[1] == lib]
        med[lib] = statistics.median(v) if v else None
    r, e = med["rjq"], med["bee"]
    print("| %s | %s | %s | %s |" % (b, "%.3f" % r if r is not None else "-", "%.3f" % e if e is not None else "-",
                                   "%.2fx" % (r / e) if r is not None and e else "-"))
EOF
