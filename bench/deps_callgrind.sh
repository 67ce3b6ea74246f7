#!/bin/bash
# bench/deps_callgrind.sh: Redis instructions of deps-bench's modes, build
# against build, on one redis-server under callgrind (bench/README.md
# "Dependencies", the dep1 section). Instructions are counted inside FCALL
# only (--toggle-collect=fcallCommand: the server's own idle work is left
# out; the clients' periodic script calls, which go by the clock, are not),
# the counters zeroed before and dumped after each run; FLUSHALL between
# runs, each build warmed first (plain 10: its library loaded).
#
# Usage: bench/deps_callgrind.sh N LABEL:DEPS_BENCH [LABEL:DEPS_BENCH...]
#   LABEL may end in =F (after=3:build/deps-bench): its runs' queues (bc,
#   bp) are set to queue format F after each FLUSHALL (meta field format,
#   as `rjq queue-format` writes it; README "Queue format 3")
# Environment:
#   MODES   the deps-bench modes per build, in order ("plain same")
#   DEPS_BENCH_ENQUEUE_ONLY=1  passed on: each run stops after its enqueue
#           (no worker: nothing of the run's wall time is counted)
#   RUN_ONLY=1  the run alone: the counters zeroed once deps-bench says
#           "enqueued" (DEPS_BENCH_RUN_ONLY=1: its workers' visits, which
#           go by the clock, pushed out to reclaim_ms 600 000)
#   CG_PORT the server's port (17450); OUT the output folder (mktemp)
# Prints per run: LABEL MODE instructions, then deps-bench's line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 N LABEL:DEPS_BENCH..." >&2; exit 2; }
N=$1
shift
MODES=${MODES:-plain same}
CG_PORT=${CG_PORT:-17450}
OUT=${OUT:-$(mktemp -d /tmp/rjq-deps-cg.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# shellcheck source=bench/cg_redis.sh
. "$here/cg_redis.sh"
# (the collection toggled by FCALL)
cg_redis_start "$CG_PORT" deps_callgrind.sh --toggle-collect=fcallCommand
export REDIS_URL=redis://127.0.0.1:$CG_PORT
run=0
for spec in "$@"; do
  label=${spec%%:*}
  bin=${spec#*:}
  fmt=
  case $label in *=*) fmt=${label#*=} ;; esac
  redis-cli -p "$CG_PORT" flushall > /dev/null
  DEPS_BENCH_ENQUEUE_ONLY='' "$bin" plain 10 > /dev/null
  for m in $MODES; do
    run=$((run + 1))
    redis-cli -p "$CG_PORT" flushall > /dev/null
    if [ -n "$fmt" ]; then
      for q in bc bp; do redis-cli -p "$CG_PORT" hset "rjq:{$q}:meta" format "$fmt" > /dev/null; done
    fi
    if [ "${RUN_ONLY:-}" = 1 ]; then
      coproc DB { DEPS_BENCH_RUN_ONLY=1 "$bin" "$m" "$N"; }
      read -r first <&"${DB[0]}"
      [ "$first" = enqueued ] || { echo "deps_callgrind.sh: deps-bench said: $first" >&2; exit 1; }
      callgrind_control -z "$CG_REDIS_PID" > /dev/null 2>&1
      echo go >&"${DB[1]}"
      read -r line <&"${DB[0]}"
      wait "$DB_PID"
    else
      callgrind_control -z "$CG_REDIS_PID" > /dev/null 2>&1
      line=$("$bin" "$m" "$N")
    fi
    callgrind_control -d "run$run" "$CG_REDIS_PID" > /dev/null 2>&1
    # (the dump is written before callgrind_control returns; cg_dumped reads it)
    echo "$label $m $(cg_dumped "run$run") :: $line"
  done
done
