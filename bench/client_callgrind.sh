#!/bin/bash
# bench/client_callgrind.sh: the client's instructions per drained job,
# measured by callgrind on rjq-bench's drain worker (issue 36, "Client";
# bench/README.md "The client's instructions per drained job").
#
# Starts a private redis-server (not under valgrind), runs `rjq-bench drain`
# under `valgrind --tool=callgrind` with CG_CLIENT=1: the forked worker
# process zeroes its counters where the timed phase starts
# (rjq_worker_start) and dumps them at the N-th completion, so the dump holds
# the worker's instructions of the drain only (the untimed pre-enqueue, in
# the parent process, runs uninstrumented: --instr-atstart=no) is left
# out. Prints per case: instructions per
# drained job, then the functions by inclusive and by self cost.
#
# Usage: bench/client_callgrind.sh [CASE...]
#   cases: 18 (PAYLOAD_BYTES=18), 1k, 16k (default: 18 16k): the drain;
#   seq-18, seq-1k, seq-16k: awaited jobs one at a time (rjq-bench
#     awaited-seq, N of them), the producer's instructions per job and its
#     worker process's (the worker's dump also holds the WARM jobs);
#   ref: the plain-command reference's client (redis-benchmark: LPUSH,
#     LMOVE, LREM, N each, PIPELINE 16, CLIENTS 50, the drain's tiny
#     payload), instructions per job of the three runs together.
# Environment:
#   RJQ_BENCH  the rjq-bench binary (build/rjq-bench: `make build`)
#   N          drained jobs per case (20000); CONC the worker's concurrency (50)
#   CG_PORT    the private server's port (17450); OUT the output folder (mktemp)
#   TOP        functions listed per table (25)
#   BULK       the untimed pre-enqueue's batch size (100)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
RJQ_BENCH=${RJQ_BENCH:-$root/build/rjq-bench}
N=${N:-20000}
CONC=${CONC:-50}
CG_PORT=${CG_PORT:-17450}
TOP=${TOP:-25}
OUT=${OUT:-$(mktemp -d /tmp/rjq-client-callgrind.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$RJQ_BENCH" ] || { echo "client_callgrind.sh: no $RJQ_BENCH (make build)" >&2; exit 1; }

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(18 16k)

# A port already served (another run's server: CG_PORT's default is shared)
# would be used silently (redis-server --daemonize exits 0 even when it
# cannot listen), its queue cleaned under the other run's jobs: refused.
if redis-cli -p "$CG_PORT" ping > /dev/null 2>&1; then
  echo "client_callgrind.sh: port $CG_PORT is served already (another run?): pick another CG_PORT" >&2
  exit 1
fi
redis-server --port "$CG_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$OUT/redis.pid" --logfile "$OUT/redis.log" --dir "$OUT"
cleanup() { [ -f "$OUT/redis.pid" ] && kill "$(cat "$OUT/redis.pid")" 2>/dev/null || true; }
trap cleanup EXIT
# (until the server answering is the one started here: its process_id is
# the pid file's; one that cannot listen exits, and is reported)
pid_on() { redis-cli -p "$CG_PORT" info server 2> /dev/null | awk -F: '/^process_id:/ { sub(/\r$/, "", $2); print $2 }'; }
for _ in $(seq 100); do [ -s "$OUT/redis.pid" ] && [ "$(pid_on)" = "$(cat "$OUT/redis.pid")" ] && break; sleep 0.1; done
[ -s "$OUT/redis.pid" ] && [ "$(pid_on)" = "$(cat "$OUT/redis.pid")" ] ||
  { echo "client_callgrind.sh: redis-server did not start on port $CG_PORT: $OUT/redis.log" >&2; exit 1; }

printf '%-6s %10s %14s %s\n' case jobs 'instr/job' 'dump'
# The instructions of callgrind dump $1 ("totals:" or "summary:").
ir_of() { awk '/^summary:|^totals:/ { print $2; exit }' "$1"; }

for c in "${cases[@]}"; do
  case $c in
    18 | seq-18) bytes=18 ;; 1k | seq-1k) bytes=1024 ;; 16k | seq-16k) bytes=16384 ;; ref) bytes=0 ;;
    *) echo "client_callgrind.sh: unknown case $c" >&2; exit 2 ;;
  esac
  rm -f "$OUT/client-$c".*
  if [ "$c" = ref ]; then
    # redis-benchmark's own instructions (its start included: ~1% at N=20000)
    pl='{"i":0,"k":"v"}'
    tot=0
    for cmd in "LPUSH rjq:{ref}:ready $pl" "LMOVE rjq:{ref}:ready rjq:{ref}:active RIGHT LEFT" \
               "LREM rjq:{ref}:active 1 $pl"; do
      # shellcheck disable=SC2086 # (the command's words)
      valgrind --tool=callgrind --callgrind-out-file="$OUT/client-ref.%p" redis-benchmark -p "$CG_PORT" \
        -n "$N" -P "${PIPELINE:-16}" -c "${CLIENTS:-50}" --csv $cmd > /dev/null 2>> "$OUT/client-ref.log"
      f=$(ls -t "$OUT"/client-ref.[0-9]* | head -1)
      tot=$((tot + $(ir_of "$f")))
    done
    printf '%-8s %10d %14.0f %s\n' "$c" "$N" "$(echo "$tot / $N" | bc -l)" "$OUT/client-ref.*"
    continue
  fi
  if [ "${c#seq-}" != "$c" ]; then
    CG_CLIENT=1 N=$N CONC=$CONC PAYLOAD_BYTES=$bytes REDIS_PORT=$CG_PORT TIMEOUT=${TIMEOUT:-3600} \
      valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/client-$c.%p" "$RJQ_BENCH" \
      awaited-seq > "$OUT/client-$c.json" 2> "$OUT/client-$c.log" ||
      { echo "client_callgrind.sh: case $c failed: $OUT/client-$c.log" >&2; exit 1; }
    for who in 'timed phase' worker; do
      dump=$(grep -l "^desc: Trigger: Client Request: $who\$" "$OUT/client-$c".* | head -1)
      [ -n "$dump" ] || { echo "client_callgrind.sh: case $c: no dump '$who'" >&2; exit 1; }
      tag=$c-producer
      [ "$who" = worker ] && tag=$c-worker
      printf '%-14s %10d %14.0f %s\n' "$tag" "$N" "$(echo "$(ir_of "$dump") / $N" | bc -l)" "$dump"
      callgrind_annotate --inclusive=yes "$dump" > "$OUT/client-$tag.inclusive" 2> /dev/null || true
      callgrind_annotate "$dump" > "$OUT/client-$tag.self" 2> /dev/null || true
    done
    grep -q '"ok":true' "$OUT/client-$c.json" ||
      echo "client_callgrind.sh: case $c: awaited-seq did not report ok: $OUT/client-$c.json" >&2
    continue
  fi
  CG_CLIENT=1 N=$N CONC=$CONC BULK=${BULK:-100} PAYLOAD_BYTES=$bytes REDIS_PORT=$CG_PORT TIMEOUT=${TIMEOUT:-3600} \
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/client-$c.%p" "$RJQ_BENCH" drain \
    > "$OUT/client-$c.json" 2> "$OUT/client-$c.log" ||
    { echo "client_callgrind.sh: case $c failed: $OUT/client-$c.log" >&2; exit 1; }
  dump=$(grep -l '^desc: Trigger: Client Request: timed phase' "$OUT/client-$c".* | head -1)
  [ -n "$dump" ] || { echo "client_callgrind.sh: case $c: no dump of the timed phase" >&2; exit 1; }
  grep -q '"ok":true' "$OUT/client-$c.json" ||
    echo "client_callgrind.sh: case $c: the drain did not report ok: $OUT/client-$c.json" >&2
  ir=$(awk '/^summary:|^totals:/ { print $2; exit }' "$dump")
  printf '%-6s %10d %14.0f %s\n' "$c" "$N" "$(echo "$ir / $N" | bc -l)" "$dump"
  callgrind_annotate --inclusive=yes "$dump" > "$OUT/client-$c.inclusive" 2> /dev/null || true
  callgrind_annotate "$dump" > "$OUT/client-$c.self" 2> /dev/null || true
done
for c in "${cases[@]}"; do
  [ -f "$OUT/client-$c.inclusive" ] || continue
  echo
  echo "== $c: inclusive ($OUT/client-$c.inclusive)"
  grep -E '^ *[0-9,]+ ' "$OUT/client-$c.inclusive" | sed -n "1,${TOP}p"
  echo "== $c: self ($OUT/client-$c.self)"
  grep -E '^ *[0-9,]+ ' "$OUT/client-$c.self" | sed -n "1,${TOP}p"
done
