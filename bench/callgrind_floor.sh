#!/bin/bash
# bench/callgrind_floor.sh: what Redis spends on a script call that does
# nothing but its commands (bench/README.md "The floor of a script call").
#
# bench/callgrind.sh measures rjq's scripts; this measures, on the same
# redis-server under callgrind, the least any script of that shape can
# cost: an FCALL with rjq's numbers of keys and arguments (the enqueue's
# 22 keys, the job columns counted one each, and 14 arguments for one job;
# the completion's 23 keys and 12 arguments with one offer) that runs the
# same commands as the awaited job's enqueue (11) and completion (12) with
# constant arguments and no logic of its own, and the issue's floor (an
# awaited job of ~10 commands with a lease and a fencing token, few keys
# and arguments). The difference between rjq-18 of bench/callgrind.sh and
# "enqueue + complete" here is the scripts' own Lua (parsing, tables,
# strings, their allocations and collection).
#
# Usage: bench/callgrind_floor.sh        (N calls per case, default 2000)
# Environment: N, CG_PORT (17442), OUT (mktemp)
set -euo pipefail
N=${N:-2000}
CG_PORT=${CG_PORT:-17442}
OUT=${OUT:-$(mktemp -d /tmp/rjq-floor.XXXXXX)}
# shellcheck source=bench/cg_redis.sh
. "$(dirname "$0")/cg_redis.sh"
mkdir -p "$OUT"

cat > "$OUT/floor.lua" << 'EOF'
#!lua name=rjqfloor
redis.register_function('f_empty', function(KEYS, ARGV) return 0 end)
-- the awaited job's enqueue (docs/scripts.md): 11 commands
redis.register_function('f_enqueue', function(KEYS, ARGV)
  redis.call('HRANDFIELD', KEYS[1], '1', 'WITHVALUES')
  redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4])
  redis.call('HINCRBY', KEYS[5], 'seq', '1')
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[6], '1', ARGV[1])
  redis.call('PUBSUB', 'NUMSUB', ARGV[2])
  redis.call('HSET', KEYS[7], '1', 'active 1 c.w.t1 @1764000000000,1764000000000,')
  redis.call('ZADD', KEYS[8], t[1], '1')
  redis.call('HSET', KEYS[9], '1', ARGV[3])
  redis.call('HSET', KEYS[1], 'w ch', '49 1 30000 8')
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end)
-- its completion: 12 commands
redis.register_function('f_complete', function(KEYS, ARGV)
  redis.call('TIME')
  redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4])
  redis.call('HMGET', KEYS[7], '1')
  redis.call('HMGET', KEYS[9], '1')
  redis.call('HMGET', KEYS[1], 'w ch', '~')
  redis.call('RPUSH', KEYS[10], '1764000000000 1')
  redis.call('ZREM', KEYS[8], '1')
  redis.call('HSET', KEYS[7], '1', 'completed 1 c.w.t1 @1764000000000,1764000000000,1764000000001')
  redis.call('HINCRBY', KEYS[5], 'retained', '1')
  redis.call('PUBLISH', ARGV[3], 'completed 3 0\n1')
  redis.call('HDEL', KEYS[9], '1')
  redis.call('HSET', KEYS[1], 'w ch', '50 1 30000 8')
  return 1
end)
-- the issue's floor: enqueue takes an idle slot, stores the payload,
-- records the lease "<id> <token>", publishes to the worker
redis.register_function('f_enqueue_floor', function(KEYS, ARGV)
  redis.call('HINCRBY', KEYS[1], 'slots', '-1')
  redis.call('HSET', KEYS[2], '1', ARGV[1])
  redis.call('ZADD', KEYS[3], '1764000030000', '1 c.w.t1')
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end)
-- complete removes that lease entry, stores the outcome, publishes it,
-- offers the slot again
redis.register_function('f_complete_floor', function(KEYS, ARGV)
  redis.call('ZREM', KEYS[3], '1 c.w.t1')
  redis.call('HSET', KEYS[4], '1', 'completed')
  redis.call('PUBLISH', ARGV[1], 'completed 3 0\n1')
  redis.call('HINCRBY', KEYS[1], 'slots', '1')
  return 1
end)
EOF

cg_redis_start "$CG_PORT" callgrind_floor.sh
pid=$CG_REDIS_PID
redis-cli -p "$CG_PORT" -x FUNCTION LOAD < "$OUT/floor.lua" > /dev/null

# $1 keys, then $2 arguments (an 18-byte payload, the push channel, the
# reply channel, then fillers), as the words of the array `words`
kv() {
  words=()
  local i
  for i in $(seq 1 "$1"); do words+=("{q}:k$i"); done
  words+=(xxxxxxxxxxxxxxxxxx "{q}:push:c" "{q}:reply:c:framed")
  for i in $(seq 4 "$2"); do words+=("a$i"); done
  words=("${words[@]:0:$(($1 + $2))}")
}

# Instructions per call of a command (redis-benchmark, one connection,
# one command at a time), after 100 unmeasured.
per_call() {
  local tag=$1
  shift
  redis-benchmark -p "$CG_PORT" -n 100 -c 1 "$@" > /dev/null
  callgrind_control -z "$pid" > /dev/null 2>&1
  redis-benchmark -p "$CG_PORT" -n "$N" -c 1 "$@" > /dev/null
  callgrind_control --dump="$tag" "$pid" > /dev/null 2>&1
  cg_dumped "$tag" | awk '{ printf "%.1f", $1 / 1000 }' | awk -v n="$N" '{ printf "%.1f", $1 / n }'
}

ping=$(per_call ping PING)
row() { # tag, what, command...
  local tag=$1 what=$2
  shift 2
  local k
  k=$(per_call "$tag" "$@")
  printf "| %-34s | %8.1fk | %8.1fk |\n" "$what" "$k" "$(awk -v a="$k" -v b="$ping" 'BEGIN { print a - b }')"
}
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') under callgrind, $N calls per case, output in $OUT"
echo
echo "| call | instr/call | less a PING |"
echo "|---|---:|---:|"
printf "| %-34s | %8.1fk | %8.1fk |\n" "PING" "$ping" 0
row e0 "FCALL, 0 keys, 0 args, no command" FCALL f_empty 0
kv 22 14
row e22 "FCALL, 22 keys, 14 args, no command" FCALL f_empty 22 "${words[@]}"
row enq "enqueue: 22 keys, 14 args, 11 commands" FCALL f_enqueue 22 "${words[@]}"
kv 23 12
row e23 "FCALL, 23 keys, 12 args, no command" FCALL f_empty 23 "${words[@]}"
row cmp "complete: 23 keys, 12 args, 12 commands" FCALL f_complete 23 "${words[@]}"
kv 3 2
row enqf "floor enqueue: 3 keys, 2 args, 4 commands" FCALL f_enqueue_floor 3 "${words[@]}"
kv 4 0
row cmpf "floor complete: 4 keys, 1 arg, 4 commands" FCALL f_complete_floor 4 "${words[@]}" "{q}:reply:c:framed"
