#!/bin/bash
# bench/native_await_floor.sh: the awaited job's floor in native Redis CPU
# (bench/README.md "The awaited job's native floor"; issue 36: "Native
# Redis CPU per awaited job <= 0.7x bee-queue's").
#
# bench/callgrind_await_floor.sh prices its stand-in scripts (tiers a, b,
# b-cuts, c, ...) in instructions on a redis-server under callgrind; this
# runs the same stand-ins (its $OUT/afloor.lua and drive.py, written by it
# with AFLOOR_FILES_ONLY=1: no copy of them here) on a redis-server NOT
# under callgrind, next to rjq itself (`rjq-bench latency`, queue format 1
# and 2) and bee-queue (the peers' `bench_beequeue.js latency`), all paced
# at RATE awaited jobs a second for SECS seconds, and reports per job:
#   - Redis CPU (INFO cpu used_cpu_user + used_cpu_sys over the window,
#     less the idle server's rate times the window), in microseconds; and
#     apart, user and sys (around the whole run, its set-up included:
#     user ~ the instructions, sys ~ the system calls and the loopback's
#     TCP work they do);
#   - commands (INFO commandstats / total_commands_processed);
#   - redis-server's read and write system calls (/proc/<pid>/io syscr,
#     syscw: no tracer's cost) and its main thread's context switches
#     (/proc/<pid>/status, voluntary + involuntary: about one wakeup per
#     sleep in epoll_wait), around the whole run;
#   - with STRACE=1, one more run of each case (STRACE_SECS long) under
#     `strace -c -f -p <redis-server>`: its system calls per job (all,
#     and read / write / epoll_wait), the run's CPU not counted (the
#     tracer slows Redis: clients that pipeline batch more under it).
# The stand-ins' jobs are strictly one at a time (drive.py: one producer,
# one worker, four connections) and paced; the latency cases' producers
# send at RATE whatever is in flight (at 1000/s a job mostly runs alone).
# Cases run interleaved (the order rotated each round), ROUNDS rounds;
# the medians are printed with their ratio to bee-queue's. Native CPU is
# a wall-clock-like measure: on a busy machine it carries the cache and
# scheduler's noise (the load average is printed each round).
#
# Usage: bench/native_await_floor.sh [case ...]
#   cases: a b b-cuts c (and any tier of callgrind_await_floor.sh), rjq1,
#   rjq2 (rjq-bench latency on a queue of format 1 / 2), bee
#   (default: a b b-cuts c rjq1 rjq2 bee)
# Environment: ROUNDS (3), RATE (1000), SECS (10), SIZE (18 bytes),
#   WARM (50: the stand-ins' unmeasured jobs), PREFILL (1000: as in
#   callgrind_await_floor.sh), IDLE_S (3), STRACE (1), STRACE_SECS (3),
#   PORT (17582), OUT (mktemp), RJQ_BENCH (build/rjq-bench), PEERS (the
#   peer harness with its node_modules; default: a copy of
#   /work/shared/peers under $OUT/peers, `npm install`ed once; without
#   node the bee rows are skipped)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-1000}
SECS=${SECS:-10}
SIZE=${SIZE:-18}
WARM=${WARM:-50}
PREFILL=${PREFILL:-1000}
IDLE_S=${IDLE_S:-3}
STRACE=${STRACE:-1}
STRACE_SECS=${STRACE_SECS:-3}
PORT=${PORT:-17582}
RJQ_BENCH=${RJQ_BENCH:-$root/build/rjq-bench}
SHARED_PEERS=${SHARED_PEERS:-/work/shared/peers}
OUT=${OUT:-$(mktemp -d /tmp/rjq-nfloor.XXXXXX)}
PY=/usr/bin/python3
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
[ -x "$RJQ_BENCH" ] || { echo "native_await_floor.sh: no $RJQ_BENCH (make build)" >&2; exit 1; }

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(a b b-cuts c rjq1 rjq2 bee)

if [[ " ${cases[*]} " == *" bee "* ]] && [ -z "${PEERS:-}" ]; then
  PEERS=$OUT/peers
  if [ ! -d "$PEERS/node_modules" ]; then
    rm -rf "$PEERS"
    cp -r "$SHARED_PEERS" "$PEERS"
    chmod -R u+w "$PEERS"
    (cd "$PEERS" && npm install --no-audit --no-fund > "$OUT/npm.log" 2>&1) ||
      { echo "native_await_floor.sh: npm install of the peers failed: $OUT/npm.log" >&2; exit 1; }
  fi
fi

# the stand-ins, from the callgrind script (nothing else of it runs)
AFLOOR_FILES_ONLY=1 OUT=$OUT "$here/callgrind_await_floor.sh"

if redis-cli -p "$PORT" ping > /dev/null 2>&1; then
  echo "native_await_floor.sh: a server already answers on port $PORT (PORT): not ours" >&2
  exit 1
fi
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$OUT/redis.pid" --logfile "$OUT/redis.log" --dir "$OUT"
stop() { [ -f "$OUT/redis.pid" ] && kill "$(cat "$OUT/redis.pid")" 2> /dev/null || true; }
trap stop EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping > /dev/null 2>&1 && break; sleep 0.1; done
pid=$(cat "$OUT/redis.pid")
loaded=$(redis-cli -p "$PORT" -x FUNCTION LOAD < "$OUT/afloor.lua")
[ "$loaded" = rjqafloor ] || { echo "native_await_floor.sh: FUNCTION LOAD: $loaded" >&2; exit 1; }

# redis-server's CPU seconds (INFO cpu): user + sys, or "user sys" (rcpu2)
rcpu() { redis-cli -p "$PORT" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f", s }'; }
rcpu2() { redis-cli -p "$PORT" info cpu | tr -d '\r' | awk -F: '/^used_cpu_user:/ { u = $2 } /^used_cpu_sys:/ { s = $2 } END { printf "%.6f %.6f", u, s }'; }
# its main thread's context switches; its read and write system calls
# (/proc/<pid>/io syscr, syscw: read, readv, ... and write, writev, ...;
# counted by the kernel, no tracer's cost)
rctx() { awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { s += $2 } END { print s }' "/proc/$pid/status"; }
rio() { awk '/^syscr:/ { r = $2 } /^syscw:/ { w = $2 } END { print r, w }' "/proc/$pid/io"; }
# the idle server's rates, CPU seconds a second: "<user+sys> <user> <sys>"
idle_rate() {
  local u0 s0 u1 s1 t0 t1
  read -r u0 s0 <<< "$(rcpu2)"; t0=$(date +%s.%N); sleep "$IDLE_S"; read -r u1 s1 <<< "$(rcpu2)"; t1=$(date +%s.%N)
  awk -v a="$u0" -v b="$u1" -v c="$s0" -v d="$s1" -v s="$t0" -v e="$t1" \
    'BEGIN { w = e - s; printf "%.6f %.6f %.6f", (b - a + d - c) / w, (b - a) / w, (d - c) / w }'
}

# $1 case, $2 tag, $3 seconds: runs it; writes "$OUT/$tag.row":
# "<cpu s> <window s> <jobs> <commands/job>"
run() {
  local c=$1 tag=$2 secs=$3 n j
  n=$((RATE * secs))
  redis-cli -p "$PORT" flushall > /dev/null
  redis-cli -p "$PORT" info commandstats > "$OUT/$tag.cs0"
  case $c in
    rjq1 | rjq2)
      QUEUE_FORMAT=${c#rjq} PAYLOAD_BYTES=$SIZE REDIS_PORT=$PORT RATE=$RATE SECS=$secs \
        "$RJQ_BENCH" latency > "$OUT/$tag.json" 2> "$OUT/$tag.err" || true
      j=$OUT/$tag.json ;;
    bee)
      (cd "$PEERS" && PAYLOAD_BYTES=$SIZE REDIS_PORT=$PORT RATE=$RATE SECS=$secs \
        node bench_beequeue.js latency > "$OUT/$tag.json" 2> "$OUT/$tag.err") || true
      j=$OUT/$tag.json ;;
    *)
      RATE=$RATE $PY "$OUT/drive.py" "$PORT" native "$c" "$SIZE" "$WARM" "$n" "$OUT/$tag" "$PREFILL" \
        > /dev/null 2> "$OUT/$tag.err"
      j= ;;
  esac
  if [ -n "$j" ]; then
    # (the CPU: their own INFO snapshots around the paced phase, the window
    # SECS; the commands: commandstats around the whole run, its warm-up
    # and set-up included, as the stand-ins' inner commands are counted)
    redis-cli -p "$PORT" info commandstats > "$OUT/$tag.cs1"
    $PY -c 'import json,sys
r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
if not r.get("ok"): sys.stderr.write("native_await_floor.sh: %s not ok: %s\n" % (sys.argv[1], r))
print(r["redis_cpu_s"], sys.argv[2])' "$j" "$secs" > "$OUT/$tag.cpu"
  fi
  read -r cpu win < "$OUT/$tag.cpu"
  awk -F'[:,=]' -v n="$n" -v cpu="$cpu" -v win="$win" 'FNR == 1 { f++ }
      /^cmdstat_/ { c = substr($1, 9); if (c == "info") next; if (f == 1) a[c] = $3; else b[c] = $3 }
      END { for (c in b) tot += b[c] - a[c]; printf "%s %s %d %.1f\n", cpu, win, n, tot / n }' \
      "$OUT/$tag.cs0" "$OUT/$tag.cs1" | tr -d '\r' > "$OUT/$tag.row"
}

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') (not under callgrind), $SIZE B, RATE=$RATE/s SECS=$SECS, $ROUNDS rounds, output in $OUT"
read -r idle idle_u idle_s <<< "$(idle_rate)"
echo "idle server: $(awk -v r="$idle" 'BEGIN { printf "%.1f", r * 1e6 }') us of CPU a second (subtracted); $(nproc) cores"
echo
echo "| round | case | Redis CPU us/job | user / sys us/job (whole run) | commands/job | reads / writes a job | ctx switches/job | jobs/s | load average |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---|"
: > "$OUT/rows"
k=${#cases[@]}
for r in $(seq "$ROUNDS"); do
  for i in $(seq 0 $((k - 1))); do
    c=${cases[$(((i + r - 1) % k))]}
    tag=$c-$r
    x0=$(rctx)
    read -r r0 q0 <<< "$(rio)"
    read -r u0 s0 <<< "$(rcpu2)"
    w0=$(date +%s.%N)
    run "$c" "$tag" "$SECS"
    w1=$(date +%s.%N)
    read -r u1 s1 <<< "$(rcpu2)"
    read -r r1 q1 <<< "$(rio)"
    x1=$(rctx)
    read -r cpu win n cmds < "$OUT/$tag.row"
    us=$(awk -v c="$cpu" -v w="$win" -v n="$n" -v r="$idle" 'BEGIN { printf "%.1f", (c - r * w) / n * 1e6 }')
    # (user and sys: around the whole run, set-up included, the idle rate
    # shared in the proportion of the idle server's own)
    read -r uj sj <<< "$(awk -v a="$u0" -v b="$u1" -v c="$s0" -v d="$s1" -v w="$(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }')" \
      -v iu="$idle_u" -v is="$idle_s" -v n="$n" 'BEGIN { printf "%.1f %.1f", (b - a - iu * w) / n * 1e6, (d - c - is * w) / n * 1e6 }')"
    rw=$(awk -v a="$((r1 - r0))" -v b="$((q1 - q0))" -v n="$n" 'BEGIN { printf "%.2f %.2f", a / n, b / n }')
    echo "$c $us $cmds $(((x1 - x0) * 100 / n)) $uj $sj $rw" >> "$OUT/rows"
    printf "| %d | %-6s | %7s | %5s / %5s | %5s | %s | %5s | %6.0f | %s |\n" "$r" "$c" "$us" "$uj" "$sj" "$cmds" \
      "${rw/ / \/ }" "$(awk -v d="$((x1 - x0))" -v n="$n" 'BEGIN { printf "%.2f", d / n }')" \
      "$(awk -v n="$n" -v w="$win" 'BEGIN { print n / w }')" "$(cut -d' ' -f1-3 /proc/loadavg)"
  done
done

if [ "$STRACE" = 1 ]; then
  echo
  echo "System calls per job (one run of each under strace -c -f -p, $STRACE_SECS s at $RATE/s; its CPU not counted):"
  echo
  echo "| case | syscalls/job | read | write | epoll_wait | other |"
  echo "|---|---:|---:|---:|---:|---:|"
  for c in "${cases[@]}"; do
    strace -c -f -p "$pid" -o "$OUT/$c-strace.txt" 2> "$OUT/$c-strace.err" &
    sp=$!
    sleep 0.5 # (attached)
    run "$c" "$c-strace" "$STRACE_SECS"
    kill -INT "$sp" 2> /dev/null || true
    wait "$sp" 2> /dev/null || true
    awk -v n="$((RATE * STRACE_SECS))" -v c="$c" '
      $NF == "total" { tot = $4 }
      $NF == "read" { rd = $4 } $NF == "write" { wr = $4 } $NF == "epoll_wait" { ep = $4 }
      END { printf "| %-6s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", c, tot / n, rd / n, wr / n, ep / n, (tot - rd - wr - ep) / n }' \
      "$OUT/$c-strace.txt"
  done
fi

echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| case | Redis CPU us/job (median of $ROUNDS) | / bee-queue's | user / sys us/job (medians) | commands/job | reads / writes a job | ctx switches/job |"
echo "|---|---:|---:|---:|---:|---:|---:|"
$PY - "$OUT/rows" "${cases[@]}" << 'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for c in sys.argv[2:]:
    v = [x for x in rows if x[0] == c]
    if v:
        med[c] = (statistics.median(float(x[1]) for x in v), statistics.median(float(x[2]) for x in v),
                  statistics.median(float(x[3]) for x in v) / 100, statistics.median(float(x[4]) for x in v),
                  statistics.median(float(x[5]) for x in v), statistics.median(float(x[6]) for x in v),
                  statistics.median(float(x[7]) for x in v))
bee = med.get('bee', (None,))[0]
for c in sys.argv[2:]:
    if c in med:
        u, k, x, us, sy, rd, wr = med[c]
        print("| %s | %.1f | %s | %.1f / %.1f | %.1f | %.2f / %.2f | %.2f |" % (c, u, "%.2fx" % (u / bee) if bee else "-",
                                                                             us, sy, k, rd, wr, x))
EOF
