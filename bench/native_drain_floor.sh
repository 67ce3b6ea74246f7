#!/bin/bash
# bench/native_drain_floor.sh: the drain's floors against the plain-command
# reference in native Redis CPU and wall clock (bench/README.md "The
# drain's native floors"; issue 36: "Drain of tiny jobs at c=50: >= 0.7x
# of the plain-command reference in the same run").
#
# bench/callgrind_drain_floor.sh prices its stand-in drains (lease,
# +state, +read, args) in instructions under callgrind; this runs the same
# stand-ins (its $OUT/dfloor.lua and drive.py, written by it with
# DFLOOR_FILES_ONLY=1: no copy of them here) on a redis-server NOT under
# callgrind, next to the plain-command reference and rjq's own drain:
#
#   ref     what `rjq-bench reference` (and `REFERENCE=1 rjq-bench drain`)
#           sends, run here command by command so each is measured apart:
#           redis-benchmark -n N -P PIPELINE(16) -c CLIENTS(50) of `LPUSH
#           rjq:{ref}:ready <payload>`, then `LMOVE ready active RIGHT
#           LEFT`, then `LREM active 1 <payload>` (payload: rjq-bench's
#           default, `{"i":0,"k":"v"}`); jobs/s = 1 / (1/LPUSH + 1/LMOVE
#           + 1/LREM), rjq-bench's formula. Its job is the three commands:
#           the Redis CPU per job is theirs (the LPUSH's share printed
#           apart).
#   rjq     `REFERENCE=1 rjq-bench drain` (N tiny jobs, CONC 50): the
#           Redis CPU of its drain phase (its JSON's redis_cpu_s: INFO cpu
#           from the worker's start to the N-th completion, the enqueue
#           not counted), its jobs/s, and its own same-process
#           ratio_to_reference (the issue's measure).
#   lease, +state, +read, args
#           the stand-ins: N jobs filled unmeasured (drive.py fill), then
#           drained by drive.py with BATCH (25: rjq's drain's ~25 a call)
#           jobs a claim and DEPTH (2) calls in flight on its connection
#           (each claim's reply sends its completion, each completion's
#           reply the next claim: two batches held, as rjq's worker at
#           c=50 holds ~50 jobs), INFO cpu around that phase.
#
# Per case: Redis CPU per job (used_cpu_user + used_cpu_sys deltas, less
# the idle server's rate over the window), Redis's busy share of the
# window (CPU / wall: near 100% is a Redis-bound run), jobs/s; around the
# whole case (fill or enqueue included), user and sys per job and the
# main thread's context switches per job (about one a wakeup: how often
# the drain let Redis sleep). Cases run interleaved (the order rotated
# each round), ROUNDS rounds; the medians are printed with:
#   - ref CPU / case CPU: the highest drain ratio that case's shape allows
#     where Redis is the limit (both jobs/s are 1 / CPU per job there);
#     also taken per round (that round's ref over the case's: the load
#     moves more between rounds than between neighbours), median and range;
#   - case jobs/s / ref jobs/s (the medians): the measured wall-clock
#     ratio. The stand-ins' client is Python: it can be the limit before
#     Redis is (the busy column says), so for them the CPU ratio is the
#     answer and the wall ratio a lower bound.
#
# Usage: bench/native_drain_floor.sh [case ...]
#   cases: ref rjq lease +state +read args (default: all); a stand-in's
#   name@D runs it with D calls in flight (lease@8: DEPTH 8)
# Environment: ROUNDS (3), N (50000), BATCH (25), DEPTH (2), CONC (50),
#   PIPELINE (16), CLIENTS (50), IDLE_S (3), PORT (17761), OUT (mktemp),
#   RJQ_BENCH (build/rjq-bench)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
ROUNDS=${ROUNDS:-3}
N=${N:-50000}
BATCH=${BATCH:-25}
DEPTH=${DEPTH:-2}
CONC=${CONC:-50}
PIPELINE=${PIPELINE:-16}
CLIENTS=${CLIENTS:-50}
IDLE_S=${IDLE_S:-3}
PORT=${PORT:-17761}
RJQ_BENCH=${RJQ_BENCH:-$root/build/rjq-bench}
OUT=${OUT:-$(mktemp -d /tmp/rjq-ndfloor.XXXXXX)}
PY=/usr/bin/python3
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
[ -x "$RJQ_BENCH" ] || { echo "native_drain_floor.sh: no $RJQ_BENCH (make build)" >&2; exit 1; }
command -v redis-benchmark > /dev/null || { echo "native_drain_floor.sh: no redis-benchmark (redis-tools)" >&2; exit 1; }

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(ref rjq lease +state +read args)

# the stand-ins, from the callgrind script (nothing else of it runs)
DFLOOR_FILES_ONLY=1 OUT=$OUT "$here/callgrind_drain_floor.sh"

if redis-cli -p "$PORT" ping > /dev/null 2>&1; then
  echo "native_drain_floor.sh: a server already answers on port $PORT (PORT): not ours" >&2
  exit 1
fi
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$OUT/redis.pid" --logfile "$OUT/redis.log" --dir "$OUT"
# (stopped and gone before the script exits: a next run may take the port)
stop() {
  local p
  p=$(cat "$OUT/redis.pid" 2> /dev/null) || return 0
  kill "$p" 2> /dev/null || return 0
  for _ in $(seq 100); do kill -0 "$p" 2> /dev/null || return 0; sleep 0.1; done
}
trap stop EXIT
for _ in $(seq 100); do [ -f "$OUT/redis.pid" ] && redis-cli -p "$PORT" ping > /dev/null 2>&1 && break; sleep 0.1; done
pid=$(cat "$OUT/redis.pid")
[ "$(redis-cli -p "$PORT" info server | tr -d '\r' | awk -F: '/^process_id:/ { print $2 }')" = "$pid" ] ||
  { echo "native_drain_floor.sh: the server on $PORT is not ours" >&2; exit 1; }
loaded=$(redis-cli -p "$PORT" -x FUNCTION LOAD < "$OUT/dfloor.lua")
[ "$loaded" = rjqdfloor ] || { echo "native_drain_floor.sh: FUNCTION LOAD: $loaded" >&2; exit 1; }

# redis-server's CPU seconds (INFO cpu: user + sys)
rcpu() { redis-cli -p "$PORT" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f", s }'; }
# its user and sys CPU seconds; its main thread's context switches (about
# one a wakeup from epoll_wait: how often the drain let Redis sleep)
rcpu2() { redis-cli -p "$PORT" info cpu | tr -d '\r' | awk -F: '/^used_cpu_user:/ { u = $2 } /^used_cpu_sys:/ { s = $2 } END { printf "%.6f %.6f", u, s }'; }
rctx() { awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { s += $2 } END { print s }' "/proc/$pid/status"; }
now() { date +%s.%N; }
idle_rate() {
  local c0 c1 t0 t1
  c0=$(rcpu); t0=$(now); sleep "$IDLE_S"; c1=$(rcpu); t1=$(now)
  awk -v a="$c0" -v b="$c1" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.6f", (b - a) / (e - s) }'
}

# one redis-benchmark command (rjq-bench's benchmark_rps): its requests/s;
# "<rps> <cpu s> <window s>" appended to $OUT/$tag.ref
ref_cmd() {
  local tag=$1 c0 c1 t0 t1 rps
  shift
  c0=$(rcpu); t0=$(now)
  rps=$(redis-benchmark -h 127.0.0.1 -p "$PORT" -n "$N" -P "$PIPELINE" -c "$CLIENTS" --csv "$@" |
    tail -1 | awk -F'","' '{ print $2 }')
  t1=$(now); c1=$(rcpu)
  echo "$rps $(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }') $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >> "$OUT/$tag.ref"
}

# $1 case, $2 tag: runs it; prints "<cpu s> <window s> <jobs> <jobs/s> <extra>"
# (extra: ref, the LPUSH's CPU share; rjq, its own ratio_to_reference)
run() {
  local c=${1%@*} tag=$2 d=$DEPTH c0 c1 out
  [[ $1 != *@* ]] || d=${1#*@}
  redis-cli -p "$PORT" flushall > /dev/null
  case $c in
    ref)
      local p='{"i":0,"k":"v"}'
      : > "$OUT/$tag.ref"
      ref_cmd "$tag" LPUSH 'rjq:{ref}:ready' "$p"
      ref_cmd "$tag" LMOVE 'rjq:{ref}:ready' 'rjq:{ref}:active' RIGHT LEFT
      ref_cmd "$tag" LREM 'rjq:{ref}:active' 1 "$p"
      [ "$(redis-cli -p "$PORT" llen 'rjq:{ref}:active')" = 0 ] ||
        echo "native_drain_floor.sh: $tag: the active list is not empty after the LREMs" >&2
      awk -v n="$N" '{ r[NR] = $1; c[NR] = $2; w += $3; cs += $2 }
        END { printf "%.6f %.6f %d %.0f %.3f\n", cs, w, n, 1 / (1 / r[1] + 1 / r[2] + 1 / r[3]), c[1] / cs }' "$OUT/$tag.ref" ;;
    rjq)
      REFERENCE=1 REDIS_PORT=$PORT N=$N CONC=$CONC PIPELINE=$PIPELINE CLIENTS=$CLIENTS \
        "$RJQ_BENCH" drain > "$OUT/$tag.json" 2> "$OUT/$tag.err" || true
      $PY -c 'import json,sys
r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
if not r.get("ok"): sys.stderr.write("native_drain_floor.sh: %s not ok: %s\n" % (sys.argv[1], r))
print("%.6f %.6f %d %s %s" % (r["redis_cpu_s"], r["elapsed_s"], int(sys.argv[2]), r["jobs_per_s"], r.get("ratio_to_reference", "-")))' \
        "$OUT/$tag.json" "$N" ;;
    *)
      $PY "$OUT/drive.py" "$PORT" "$N" "$BATCH" "$c" fill
      c0=$(rcpu)
      out=$($PY "$OUT/drive.py" "$PORT" "$N" "$BATCH" "$c" run "$d")
      c1=$(rcpu)
      read -r got el <<< "$out"
      [ "$got" = "$N" ] || echo "native_drain_floor.sh: $tag: $got of $N jobs drained" >&2
      awk -v a="$c0" -v b="$c1" -v n="$got" -v e="$el" 'BEGIN { printf "%.6f %.6f %d %.0f -\n", b - a, e, n, n / e }' ;;
  esac
}

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') (not under callgrind), N=$N, stand-ins $BATCH a call $DEPTH in flight, rjq CONC=$CONC, reference -P $PIPELINE -c $CLIENTS, $ROUNDS rounds, output in $OUT"
idle=$(idle_rate)
echo "idle server: $(awk -v r="$idle" 'BEGIN { printf "%.1f", r * 1e6 }') us of CPU a second (subtracted); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | case | Redis CPU us/job | Redis busy | jobs/s | user / sys us/job (whole case) | ctx switches/job (whole case) | note | load average |"
echo "|---:|---|---:|---:|---:|---:|---:|---|---|"
: > "$OUT/rows"
k=${#cases[@]}
for r in $(seq "$ROUNDS"); do
  for i in $(seq 0 $((k - 1))); do
    c=${cases[$(((i + r - 1) % k))]}
    x0=$(rctx)
    read -r u0 s0 <<< "$(rcpu2)"
    read -r cpu win n jps extra <<< "$(run "$c" "$c-$r")"
    read -r u1 s1 <<< "$(rcpu2)"
    x1=$(rctx)
    # (user and sys: around the whole case, the stand-ins' fill and rjq's
    # enqueue included; context switches too)
    us_sy=$(awk -v a="$u0" -v b="$u1" -v c="$s0" -v d="$s1" -v n="$n" 'BEGIN { printf "%.2f / %.2f", (b - a) / n * 1e6, (d - c) / n * 1e6 }')
    ctx=$(awk -v d="$((x1 - x0))" -v n="$n" 'BEGIN { printf "%.3f", d / n }')
    us=$(awk -v c="$cpu" -v w="$win" -v n="$n" -v r="$idle" 'BEGIN { printf "%.2f", (c - r * w) / n * 1e6 }')
    busy=$(awk -v c="$cpu" -v w="$win" 'BEGIN { printf "%.0f%%", c / w * 100 }')
    case $c in
      ref) note="LPUSH's share of the CPU $extra" ;;
      rjq) note="its own ratio_to_reference $extra" ;;
      *) note= ;;
    esac
    echo "$r $c $us $jps ${busy%\%} $extra $ctx" >> "$OUT/rows"
    printf "| %d | %-8s | %6s | %4s | %7s | %s | %s | %s | %s |\n" "$r" "$c" "$us" "$busy" "$jps" "$us_sy" "$ctx" "$note" \
      "$(cut -d' ' -f1-3 /proc/loadavg)"
  done
done

echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| case | Redis CPU us/job (median of $ROUNDS) | ref CPU / case CPU (Redis-bound ceiling) | the same, a round's pair (median; range) | Redis busy | ctx switches/job | jobs/s (median) | jobs/s / ref's (wall) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
$PY - "$OUT/rows" "${cases[@]}" << 'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for c in sys.argv[2:]:
    v = [x for x in rows if x[1] == c]
    if v:
        med[c] = [statistics.median(float(x[j]) for x in v) for j in (2, 3, 4, 6)]
        if c == 'rjq':
            rr = [float(x[5]) for x in v if x[5] != '-']
            med[c].append(statistics.median(rr) if rr else None)
ref = med.get('ref')
for c in sys.argv[2:]:
    if c not in med: continue
    us, jps, busy, ctx = med[c][:4]
    cr = "%.2fx" % (ref[0] / us) if ref else "-"
    wr = "%.2fx" % (jps / ref[1]) if ref else "-"
    if c == 'rjq' and med[c][4] is not None: wr += " (its own, same process: %.2fx)" % med[c][4]
    if c == 'ref':
        lp = statistics.median(float(x[5]) for x in rows if x[1] == 'ref')
        cr = "1 (LMOVE + LREM alone: %.2f us, %.0f%%)" % (us * (1 - lp), (1 - lp) * 100)
        wr = "1"
    # (each round's ref over the case's in that round: the load moves
    # between rounds more than between neighbours)
    rc = {x[0]: float(x[2]) for x in rows if x[1] == 'ref'}
    pr = [rc[x[0]] / float(x[2]) for x in rows if x[1] == c and x[0] in rc]
    pp = "%.2fx; %.2f-%.2f" % (statistics.median(pr), min(pr), max(pr)) if pr and c != 'ref' else "-"
    print("| %s | %.2f | %s | %s | %.0f%% | %.3f | %.0f | %s |" % (c, us, cr, pp, busy, ctx, jps, wr))
EOF
