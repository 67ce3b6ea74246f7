#!/bin/bash
# bench/callgrind.sh: Redis instructions and commands per job, measured by
# callgrind on redis-server (bench/README.md "Redis work per job").
#
# Wall-clock figures on a shared machine move by 30% between runs; the
# instructions a redis-server executes per job do not. This starts a private
# redis-server under `valgrind --tool=callgrind`, runs each case with the
# counters zeroed at the start of its timed phase and dumped at its end (the
# method of the peers' callgrind/README.md: their cg_mark.sh, and CG_MARK in
# rjq-bench), subtracts the idle server's own work over the window, and prints
# one table row per case:
#   instructions per job (Redis user space), commands per job (commands run
#   inside scripts included; INFO left out) and script calls per job.
#
# Usage: bench/callgrind.sh [CASE...]
#   rjq cases:  rjq-18 rjq-1k rjq-16k (awaited jobs one at a time:
#               rjq-bench awaited-seq at PAYLOAD_BYTES 18, 1024, 16384)
#               rjq2-18 rjq2-1k rjq2-16k (the same on a queue of format 2:
#               QUEUE_FORMAT=2, docs/scripts.md "Queue format 2")
#               rjqb-18 rjqb-1k (the same on a bounded queue, MAX_WAITING
#               1000000: the general enqueue, enqueue.lua, and its push path)
#               rjq-drain (rjq-bench drain, tiny jobs, c=50)
#               rjq-enqueue (rjq-bench enqueue-single, N jobs one call
#               each; with JOB_GROUPS, spread round-robin over the groups)
#               ref-drain (rjq-bench reference: the plain-command reference
#               the drain is compared with, LPUSH, LMOVE, LREM DRAIN_N each
#               by redis-benchmark, PIPELINE 16, CLIENTS 50; a "job" is one
#               of each)
#   peer cases: bee-18 bee-1k bee-16k bull-18 bull-1k bull-16k (callgrind/
#               seq_*.js of the peers), bee-drain bull-drain
#   default: rjq-18 rjq-1k rjq-16k rjq-drain bee-18 bee-1k bee-16k bee-drain
#            bull-18 bull-1k bull-16k
# Environment:
#   RJQ_BENCH  the rjq-bench binary (build/rjq-bench: `make build`)
#   PEERS      the peer harness with its node_modules (default: a copy of
#              /work/shared/peers under $OUT/peers, `npm install`ed once);
#              never modified
#   N          awaited jobs per case (2000); DRAIN_N drained jobs (20000)
#   CG_PORT    the server's port (17440); OUT the output folder (mktemp)
#   TIMEOUT    rjq-bench's limit per case, s (3600: under callgrind a 16 KiB
#              awaited job takes ~0.1 s)
#   CG_IDLE_S  seconds of the rjq clients idle before an awaited case (10):
#              their background work (liveness, sweeps, polls go by the clock,
#              so a loaded machine's slower jobs would carry more of it) is
#              measured there and subtracted, instead of the idle server's
#   REPORT=1   no run: the table again from the files an earlier run left in OUT
#   RECLAIM_MS the awaited cases' worker's reclaim_ms (60000: its visits of
#              the queue go by the clock; with the default 1000 they were
#              half a script call per job on a loaded machine, where each
#              job took 0.2 s under callgrind)
#   CMDS=1     also print each case's commands per job, by command
#   WARM       the rjq awaited cases' unmeasured jobs first (600): past
#              hash-max-listpack-entries (512), so the job columns are hash
#              tables when the timed phase starts (the steady state; from a
#              flushed server the first 512 jobs' HSETs scan listpacks,
#              ~31k a job of an N=1000 figure). WARM=10: the old default
set -euo pipefail
# (valgrind and callgrind_control: the valgrind package; redis-cli: redis-tools)

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
RJQ_BENCH=${RJQ_BENCH:-$root/build/rjq-bench}
N=${N:-2000}
DRAIN_N=${DRAIN_N:-20000}
export TIMEOUT=${TIMEOUT:-3600}
export CG_PORT=${CG_PORT:-17440}
OUT=${OUT:-$(mktemp -d /tmp/rjq-callgrind.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# shellcheck source=bench/cg_redis.sh
. "$here/cg_redis.sh"
SHARED_PEERS=${SHARED_PEERS:-/work/shared/peers}

cases=("$@")
[ ${#cases[@]} -gt 0 ] ||
  cases=(rjq-18 rjq-1k rjq-16k rjq-drain bee-18 bee-1k bee-16k bee-drain bull-18 bull-1k bull-16k)

need_peers=0
for c in "${cases[@]}"; do case $c in bee-* | bull-*) need_peers=1 ;; esac; done
if [ $need_peers = 1 ] && [ -z "${PEERS:-}" ]; then
  PEERS=$OUT/peers
  if [ ! -d "$PEERS/node_modules" ]; then
    rm -rf "$PEERS"
    cp -r "$SHARED_PEERS" "$PEERS"
    chmod -R u+w "$PEERS"
    (cd "$PEERS" && npm install --no-audit --no-fund > "$OUT/npm.log" 2>&1) ||
      { echo "callgrind.sh: npm install of the peers failed: $OUT/npm.log" >&2; exit 1; }
  fi
fi
[ $need_peers = 0 ] || [ -d "$PEERS/node_modules" ] || { echo "callgrind.sh: no $PEERS/node_modules" >&2; exit 1; }
for c in "${cases[@]}"; do
  case $c in rjq-* | rjq2-* | rjqb-* | ref-*) [ -x "$RJQ_BENCH" ] || { echo "callgrind.sh: no $RJQ_BENCH (make build)" >&2; exit 1; } ;; esac
done

# cg_mark.sh (the peers' method): commandstats before and after, callgrind
# zero and dump of the server.
mark=$OUT/cg_mark.sh
cp "$SHARED_PEERS/callgrind/cg_mark.sh" "$mark"
chmod u+wx "$mark"
export CG_MARK=$mark CG_DIR=$OUT

if [ "${REPORT:-0}" = 1 ]; then # the table again from the files of an earlier run in $OUT
  CG_REDIS_PID='*'
else
cg_redis_start "$CG_PORT" callgrind.sh
export CG_REDIS_PID
fi
window() { awk '{ a = $1 } END { print a }' "$OUT/$1.t1" | awk -v t0="$(cat "$OUT/$1.t0")" '{ printf "%.3f", $1 - t0 }'; }

# The idle server's own work per second (cron, valgrind's own clock), over
# a window of known length, subtracted from each case.
if [ "${REPORT:-0}" != 1 ]; then
  CG_TAG=idle "$mark" zero 2> /dev/null
  sleep 5
  CG_TAG=idle "$mark" dump 2> /dev/null
fi
idle_rate=$(awk -v ir="$(cg_dumped idle)" -v s="$(window idle)" 'BEGIN { printf "%.0f", ir / s }')

# Script calls in the window of $1.
scripts_in() {
  awk -F'[:,=]' 'FNR == 1 { f++ }
    /^cmdstat_(fcall|fcall_ro|evalsha|eval|evalsha_ro|eval_ro):/ { if (f == 1) a += $3; else b += $3 }
    END { print b - a }' "$OUT/$1.cs0" "$OUT/$1.cs1"
}

# Commands per job of the window of $1 (INFO, the snapshots, left out),
# less the background of $3 (that window's commands, by command, times
# $4 / $5); prints "commands scripts".
cmds() {
  local bg0=/dev/null bg1=/dev/null
  if [ -n "${3:-}" ]; then bg0=$OUT/$3.cs0 bg1=$OUT/$3.cs1; fi
  awk -F'[:,=]' -v n="$2" -v detail="${CMDS:-0}" -v tag="$1" -v bgs="${5:-1}" -v secs="${4:-0}" '
    FNR == 1 { file = FILENAME }
    /^cmdstat_/ { name = substr($1, 9); if (name == "info") next
                  if (file ~ /\.cs0$/ && file !~ /-idle\.cs0$/) a[name] = $3
                  else if (file ~ /-idle\.cs0$/) ia[name] = $3
                  else if (file ~ /-idle\.cs1$/) ib[name] = $3
                  else b[name] = $3 }
    END { for (c in b) { d = b[c] - a[c] - (ib[c] - ia[c]) / bgs * secs; if (d <= 0) continue; tot += d
                         if (c ~ /^(fcall|fcall_ro|evalsha|eval|evalsha_ro|eval_ro)$/) lua += d
                         if (detail == 1) printf "  %-8s %-20s %8.2f\n", tag, c, d / n > "/dev/stderr" }
          printf "%.1f %.2f\n", tot / n, lua / n }' "$OUT/$1.cs0" "$OUT/$1.cs1" "$bg0" "$bg1"
}

run_case() {
  local c=$1 jobs pb='' kind
  case $c in
    *-18) pb=18 ;; *-1k) pb=1024 ;; *-16k) pb=16384 ;;
  esac
  case $c in *-drain) jobs=$DRAIN_N; kind=drain ;; *) jobs=$N; kind=awaited ;; esac
  [ "$c" = ref-drain ] && kind=plain
  [ "$c" = rjq-enqueue ] && kind=enqueue
  export CG_TAG=$c
  [ "${REPORT:-0}" = 1 ] || {
  rm -f "$OUT/$c".* "$OUT/$c"-idle.*
  redis-cli -p "$CG_PORT" flushall > /dev/null
  case $c in
    rjq-drain) # (small pre-enqueue batches: a batch of 1000 may take > 10 s under callgrind)
      REDIS_PORT=$CG_PORT N=$jobs BULK=${BULK:-100} BULK_WINDOW=${BULK_WINDOW:-2} "$RJQ_BENCH" drain > "$OUT/$c.json" 2> "$OUT/$c.err" ;;
    rjq-enqueue) # (enqueue-single, one rjq_enqueue() call per job; JOB_GROUPS: spread over groups)
      REDIS_PORT=$CG_PORT N=$jobs "$RJQ_BENCH" enqueue-single > "$OUT/$c.json" 2> "$OUT/$c.err" ;;
    ref-drain) # the plain-command reference (rjq-bench reference: LPUSH, LMOVE, LREM, N each)
      REDIS_PORT=$CG_PORT N=$jobs "$RJQ_BENCH" reference > "$OUT/$c.json" 2> "$OUT/$c.err" ;;
    rjq-* | rjq2-* | rjqb-*) QUEUE_FORMAT=$([ "${c%%-*}" = rjq2 ] && echo 2 || echo 1) \
             MAX_WAITING=$([ "${c%%-*}" = rjqb ] && echo 1000000 || echo '') \
             REDIS_PORT=$CG_PORT N=$jobs PAYLOAD_BYTES=$pb WARM=${WARM:-600} CG_IDLE_S=${CG_IDLE_S:-10} RECLAIM_MS=${RECLAIM_MS:-60000} \
             "$RJQ_BENCH" awaited-seq > "$OUT/$c.json" 2> "$OUT/$c.err" ;;
    bee-drain | bull-drain)
      local js=bench_beequeue.js
      [ "$c" = bull-drain ] && js=bench_bullmq.js
      (cd "$PEERS" && REDIS_PORT=$CG_PORT N=$jobs CG_ZERO_SNAP=1 CG_DUMP_SNAP=2 \
        node -r ./callgrind/cg_hook.js "$js" drain > "$OUT/$c.json" 2> "$OUT/$c.err") ;;
    bee-* | bull-*)
      local js=callgrind/seq_beequeue.js
      [ "${c%%-*}" = bull ] && js=callgrind/seq_bullmq.js
      (cd "$PEERS" && REDIS_PORT=$CG_PORT N=$jobs PAYLOAD_BYTES=$pb CG_ZERO_SNAP=1 CG_DUMP_SNAP=2 \
        node -r ./callgrind/cg_hook.js "$js" > "$OUT/$c.json" 2> "$OUT/$c.err") ;;
    *) echo "callgrind.sh: unknown case $c" >&2; return 1 ;;
  esac
  }
  if [ ! -s "$OUT/$c.cs1" ]; then
    echo "callgrind.sh: $c: no dump (see $OUT/$c.err)" >&2
    return 1
  fi
  local ir secs cs rate=$idle_rate
  ir=$(cg_dumped "$c")
  secs=$(window "$c")
  if [ -s "$OUT/$c-idle.cs1" ]; then
    # The clients' background (rjq-bench awaited-seq: CG_IDLE_S seconds
    # idle first: liveness beats, the worker's visits of the queue with
    # RECLAIM_MS, the server's cron) goes by the clock: subtracted for the
    # window's length, instead of the idle server's alone.
    local isecs k
    isecs=$(window "$c-idle")
    k=$(awk -v s="$secs" -v is="$isecs" 'BEGIN { printf "%.4f", s / is }')
    rate=$(awk -v ir="$(cg_dumped "$c-idle")" -v is="$isecs" 'BEGIN { printf "%.0f", ir / is }')
    cs=$(cmds "$c" "$jobs" "$c-idle" "$k" 1)
  else
    cs=$(cmds "$c" "$jobs")
  fi
  local ok
  ok=$(grep -o '"ok":[a-z]*' "$OUT/$c.json" | tail -1 | cut -d: -f2)
  awk -v c="$c" -v k="$kind" -v pb="${pb:-18}" -v n="$jobs" -v ir="$ir" -v s="$secs" -v idle="$rate" \
      -v cs="$cs" -v ok="${ok:-?}" 'BEGIN { split(cs, x, " ")
        printf "| %-10s | %-7s | %5s | %6d | %8.1fk | %6.1f | %5.2f | %s |\n",
               c, k, pb, n, (ir - idle * s) / n / 1000, x[1], x[2], ok }'
}

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') under callgrind (pid $CG_REDIS_PID), output in $OUT"
echo "idle server: $idle_rate instructions/s (subtracted)"
echo
echo "| case       | kind    | bytes |   jobs | Redis instr/job | commands/job | scripts/job | ok |"
echo "|------------|---------|------:|-------:|---------:|-------:|------:|----|"
rc=0
for c in "${cases[@]}"; do run_case "$c" || rc=1; done
exit $rc
