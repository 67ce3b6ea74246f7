#!/bin/bash
# bench/callgrind_lean.sh: Redis instructions per call of the lean pair
# (enqueue_one.lua, complete_one.lua), one script call at a time, before
# and after a change, with no client background (bench/README.md "The
# lean pair's Lua").
#
# bench/callgrind.sh measures a whole awaited job through rjq-bench, and
# with it the clients' clock-driven background (liveness beats, sweeps),
# which grows with the machine's load: runs minutes apart differ by
# 10-30%. This loads the function library of two source trees into one
# redis-server under callgrind and sends each case as a file of commands
# (redis-cli, one connection): N calls after N unmeasured, the counters
# zeroed before and dumped after: no client background; two runs differ
# by a few k (the Lua heap and string table differ with what ran before).
#   enqueue_one of an awaited job with no worker registered (the job goes
#     to ready: the counter, payload, state, watchers, the doorbell);
#   enqueue_one of an awaited job pushed to a registered worker on a
#     queue of format 2 (a redis-cli subscribed to its push channel; the
#     registration marked " 2", one slot, written before each call under
#     the same field, as one worker's registration is: the job is active,
#     its channel in its state, the registration taken),
#     less the cost of that set-up HSET measured alone;
#   complete_one of an active job with a watcher (an empty result, then
#     a 3-byte one; no offer), less the cost of its set-up commands
#     (HSET state, ZADD active, HSET watchers per job, measured alone);
#   the same with an offer of one slot to the worker's registration of
#     the same epoch, written before each call (one slot left: a worker
#     of two slots), less its set-up (the same and that HSET idle).
#
# Usage: bench/callgrind_lean.sh [BEFORE [AFTER]]
#   BEFORE, AFTER: git revisions of this repository (default: main, and
#   the working tree for AFTER)
# Environment: N (2000), CG_PORT (17751), OUT (mktemp), FCALL_ONLY (1:
#   count only inside the FCALLs, --toggle-collect=fcallCommand: the
#   server's cron, the set-up commands and redis-cli's start-up COMMAND
#   DOCS are left out, ~13k a call of an N=1000 case that moved with the
#   machine's load; 0: the whole server, as before aw36)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
BEFORE=${1:-main}
AFTER=${2:-}
N=${N:-2000}
P=${CG_PORT:-17751}
OUT=${OUT:-$(mktemp -d /tmp/rjq-lean.XXXXXX)}
# shellcheck source=bench/cg_redis.sh
. "$here/cg_redis.sh"
mkdir -p "$OUT"

# The function library of a tree (src/lua, src/keys.def, cmake/), as
# cmake/embed_lua.cmake makes it, written to $2/lib.lua.
library() {
  local tree=$1 dir=$2
  mkdir -p "$dir/gen"
  local list
  list=$(sed -n '/^set(RJQ_LUA_SCRIPTS/,/)/p' "$tree/CMakeLists.txt" | tr -d '\n' |
         sed 's/set(RJQ_LUA_SCRIPTS//; s/)//' | tr -s ' ' ',' | sed 's/^,//; s/,$//')
  cmake -DLUA_DIR="$tree/src/lua" -DSCRIPTS="$list" -DOUT_C="$dir/gen/rjq_scripts.c" \
        -DOUT_H="$dir/gen/rjq_scripts.h" -DKEYS_DEF="$tree/src/keys.def" \
        -DOUT_KEYS_H="$dir/gen/rjq_keys.h" -DOUT_KEYS_C="$dir/gen/rjq_keys.c" \
        -P "$tree/cmake/embed_lua.cmake"
  printf '#include <stdio.h>\n#include "rjq_scripts.h"\nint main(void) { fwrite(rjq__library, 1, rjq__library_len, stdout); return 0; }\n' > "$dir/print.c"
  cc -I"$dir/gen" -o "$dir/print" "$dir/print.c" "$dir/gen/rjq_scripts.c"
  "$dir/print" > "$dir/lib.lua"
}
mkdir -p "$OUT/b/tree" "$OUT/a"
git -C "$root" archive "$BEFORE" CMakeLists.txt src/lua src/keys.def cmake | tar -x -C "$OUT/b/tree"
library "$OUT/b/tree" "$OUT/b"
if [ -n "$AFTER" ]; then
  mkdir -p "$OUT/a/tree"
  git -C "$root" archive "$AFTER" CMakeLists.txt src/lua src/keys.def cmake | tar -x -C "$OUT/a/tree"
  library "$OUT/a/tree" "$OUT/a"
else
  library "$root" "$OUT/a"
fi
fb=$(grep -o 'rjq_[0-9a-f]*_' "$OUT/b/lib.lua" | head -1)
fa=$(grep -o 'rjq_[0-9a-f]*_' "$OUT/a/lib.lua" | head -1)
[ "$fb" != "$fa" ] || { echo "callgrind_lean.sh: the two trees have the same scripts" >&2; exit 1; }

if [ "${FCALL_ONLY:-1}" = 1 ]; then cg_redis_start "$P" callgrind_lean.sh --toggle-collect=fcallCommand
else cg_redis_start "$P" callgrind_lean.sh; fi
pid=$CG_REDIS_PID
redis-cli -p "$P" -x FUNCTION LOAD < "$OUT/b/lib.lua" > /dev/null
redis-cli -p "$P" -x FUNCTION LOAD < "$OUT/a/lib.lua" > /dev/null

# Instructions of one run of a command file (after one unmeasured run of
# the same commands for other jobs: $3).
# A refused call ends the run: its error path is not the case measured
# (redis-cli prints an error reply as a line "ERR ..." or "WRONGTYPE ...").
replies_ok() { # tag replies-file
  if grep -qE '^(ERR|WRONGTYPE|NOSCRIPT)' "$2"; then
    echo "callgrind_lean.sh: $1: a call was refused: $(grep -m1 -E '^(ERR|WRONGTYPE|NOSCRIPT)' "$2")" >&2
    exit 1
  fi
}
measure() { # tag file warm-up-file
  redis-cli -p "$P" < "$3" > "$OUT/$1.warm.out"
  replies_ok "$1" "$OUT/$1.warm.out"
  callgrind_control -z "$pid" > /dev/null 2>&1
  redis-cli -p "$P" < "$2" > "$OUT/$1.out"
  callgrind_control --dump="$1" "$pid" > /dev/null 2>&1
  replies_ok "$1" "$OUT/$1.out"
  cg_dumped "$1"
}
# The commands of N jobs from id $4 on: kind, function prefix, queue, first id, result
gen() {
  local kind=$1 fn=$2 q=$3 from=$4 res=${5:-}
  local i
  for i in $(seq "$from" $((from + N - 1))); do
    case $kind in
      enq) echo "FCALL ${fn}enqueue_one 10 {$q}:ready {$q}:prio {$q}:stats {$q}:active {$q}:idle {$q}:monitored {$q}:events {$q}:payload {$q}:state {$q}:watchers {$q}:wake {$q}:reply:c:framed t$i xxxxxxxxxxxxxxxxxx" ;;
      pushsetup | push)
        echo "HSET {$q}:idle \"w1 {$q}:push:c\" \"1 1 30000 8 2\""
        [ "$kind" = pushsetup ] ||
          echo "FCALL ${fn}enqueue_one 11 {$q}:ready {$q}:prio {$q}:stats {$q}:active {$q}:idle {$q}:monitored {$q}:events {$q}:payload {$q}:state {$q}:watchers {$q}:meta {$q}:wake {$q}:reply:c:framed t$i xxxxxxxxxxxxxxxxxx 2" ;;
      setup | cmp | osetup | ocmp)
        echo "HSET {$q}:state $i \"active 1 c.w.t1 @1764000000000,1764000000000,\""
        echo "ZADD {$q}:active 1764000030000 $i"
        echo "HSET {$q}:watchers $i {$q}:reply:c:framed"
        case $kind in
          cmp) echo "FCALL ${fn}complete_one 14 {$q}:active {$q}:completed {$q}:stats {$q}:ready {$q}:prio {$q}:idle {$q}:monitored {$q}:events {$q}:deadlines {$q}:g {$q}:state {$q}:result {$q}:watchers {$q}:dependents t:{$q}: -1 0 \"\" \"\" \"\" 0 $i \"1 c.w.t1\" $res" ;;
          osetup | ocmp)
            echo "HSET {$q}:idle \"w1 {$q}:push:c\" \"1 1 30000 8\""
            [ "$kind" = osetup ] ||
              echo "FCALL ${fn}complete_one 14 {$q}:active {$q}:completed {$q}:stats {$q}:ready {$q}:prio {$q}:idle {$q}:monitored {$q}:events {$q}:deadlines {$q}:g {$q}:state {$q}:result {$q}:watchers {$q}:dependents t:{$q}: -1 0 \"w1 {$q}:push:c\" 1 30000 1 $i \"1 c.w.t1\" $res" ;;
        esac ;;
    esac
  done
}
per() { awk -v x="$1" -v s="${2:-0}" -v n="$N" 'BEGIN { printf "%.1fk", (x - s) / n / 1000 }'; }
# A completion case per call less its set-up's: $1 the set-up's gen case,
# $2 the completion's, $3 the queue, $4 the function, $5 the result. The
# set-up's jobs (measured first) are the ones the completions then finish.
complete_less_setup() {
  local sc=$1 cc=$2 q=$3 fn=$4 res=$5 s c
  gen "$sc" "$fn" "$q" 1 > "$OUT/s1_$q.txt"
  gen "$sc" "$fn" "$q" $((N + 1)) > "$OUT/s2_$q.txt"
  gen "$cc" "$fn" "$q" $((2 * N + 1)) "$res" > "$OUT/c1_$q.txt"
  gen "$cc" "$fn" "$q" $((3 * N + 1)) "$res" > "$OUT/c2_$q.txt"
  s=$(measure "s$q" "$OUT/s2_$q.txt" "$OUT/s1_$q.txt")
  c=$(measure "c$q" "$OUT/c2_$q.txt" "$OUT/c1_$q.txt")
  per "$c" "$s"
}
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') under callgrind, $N calls per case, before $BEFORE, after ${AFTER:-the working tree}; output in $OUT"
echo
echo "| call | before | after |"
echo "|---|---:|---:|"
declare -A r
for v in b a; do
  fn=$fb; [ $v = a ] && fn=$fa
  gen enq "$fn" "q$v" 1 > "$OUT/enq1_$v.txt"
  gen enq "$fn" "q$v" $((N + 1)) > "$OUT/enq2_$v.txt"
  r[$v]=$(per "$(measure "enq$v" "$OUT/enq2_$v.txt" "$OUT/enq1_$v.txt")")
done
echo "| enqueue_one, awaited, no worker (the job to ready) | ${r[b]} | ${r[a]} |"
subs=()
for v in b a; do
  fn=$fb; [ $v = a ] && fn=$fa
  q=p$v
  redis-cli -p "$P" HSET "{$q}:meta" format 2 > /dev/null
  redis-cli -p "$P" SUBSCRIBE "{$q}:push:c" > /dev/null &
  subs+=($!)
  until [ "$(redis-cli -p "$P" PUBSUB NUMSUB "{$q}:push:c" | tail -1)" = 1 ]; do sleep 0.2; done
  gen pushsetup "$fn" "$q" 1 > "$OUT/ps1_$q.txt"
  gen pushsetup "$fn" "$q" $((N + 1)) > "$OUT/ps2_$q.txt"
  gen push "$fn" "$q" $((2 * N + 1)) > "$OUT/p1_$q.txt"
  gen push "$fn" "$q" $((3 * N + 1)) > "$OUT/p2_$q.txt"
  s=$(measure "s$q" "$OUT/ps2_$q.txt" "$OUT/ps1_$q.txt")
  c=$(measure "c$q" "$OUT/p2_$q.txt" "$OUT/p1_$q.txt")
  r[$v]=$(per "$c" "$s")
done
kill "${subs[@]}" 2> /dev/null || true
echo "| enqueue_one, awaited, pushed to a registered worker, format 2 (less its set-up) | ${r[b]} | ${r[a]} |"
k=0
for res in '""' xyz; do
  k=$((k + 1))
  for v in b a; do
    fn=$fb; [ $v = a ] && fn=$fa
    r[$v]=$(complete_less_setup setup cmp "c$k$v" "$fn" "$res")
  done
  echo "| complete_one, an active job with a watcher, result $res (less its set-up) | ${r[b]} | ${r[a]} |"
done
for v in b a; do
  fn=$fb; [ $v = a ] && fn=$fa
  r[$v]=$(complete_less_setup osetup ocmp "o$v" "$fn" '""')
done
echo "| complete_one, the same with an offer to the worker's registration (same epoch), result \"\" (less its set-up) | ${r[b]} | ${r[a]} |"
