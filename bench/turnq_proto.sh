#!/bin/bash
# bench/turnq_proto.sh: Redis instructions of the group step of an enqueue
# and of a claim, today's per-group lists and ring against the turn queue's
# design (docs/scripts.md "The turn queue"), measured by callgrind on a
# private redis-server. Not rjq's scripts: two Lua stand-ins that run the
# same commands with the same arguments as GROUPS.push/offer and the
# GROUPS.take/taken/count of a claim whose groups all give one job (the
# 1 000-group drain: no limits, weights, rates or priorities), and the
# design's. What is common to both (the claim's plain part, load_jobs, the
# job records, the completion) is left out: the difference per job is what
# the design would save on `JOB_GROUPS=1000 bench/callgrind.sh rjq-drain`.
#
# A second table: the unit costs inside a script (a call, a command, a hash
# field, a score returned, an LPOP of one id), each case's EVALSHA less a
# PING's.
#
# Usage: bench/turnq_proto.sh
# Environment: GROUPS_N groups (1000), PER jobs each (10), WANT jobs per
# claim (25), CG_PORT (17451), OUT the output folder (mktemp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
NG=${GROUPS_N:-1000}
PER=${PER:-10}
WANT=${WANT:-25}
P=${CG_PORT:-17451}
OUT=${OUT:-$(mktemp -d /tmp/rjq-turnq.XXXXXX)}
# shellcheck source=bench/cg_redis.sh
. "$here/cg_redis.sh"

# today's enqueue group step: GROUPS.push (RPUSH, gready, the depth index)
# and GROUPS.offer on a queue without group settings (EXISTS conf, ZSCORE
# of the ring; a group not in it: the next turn, ZADD, ZCARD)
cat > "$OUT/old_enq.lua" <<'LUA'
local G, id, g = KEYS[1], ARGV[1], ARGV[2]
redis.call('HSET', G .. 'job', id, g)
redis.call('RPUSH', G .. 'r:' .. g, id)
redis.call('HINCRBY', G .. 'stats', 'gready', 1)
redis.call('ZADD', G .. 'depth', 'INCR', '-1', g)
redis.call('EXISTS', G .. 'conf')
if redis.call('ZSCORE', G .. 'ring', g) then return 0 end
local t = redis.call('ZRANGE', G .. 'ring', -1, -1, 'WITHSCORES')
local turn = t[2] and math.floor(tonumber(t[2])) or 0
redis.call('ZADD', G .. 'ring', string.format('%d', turn + 1), g)
redis.call('ZCARD', G .. 'ring')
return 1
LUA
# today's claim group step (every group visited gives its one job and
# stays: the ring's ZADD to the back)
cat > "$OUT/old_claim.lua" <<'LUA'
local G, want = KEYS[1], tonumber(ARGV[1])
redis.call('ZRANGEBYSCORE', G .. 'delayed', '-inf', '1764000000000', 'LIMIT', '0', '1000')
redis.call('EXISTS', G .. 'conf')
local ring = G .. 'ring'
local heads = redis.call('ZRANGE', ring, 0, string.format('%d', want + 7))
local t = redis.call('ZRANGE', ring, -1, -1, 'WITHSCORES')
local turn = math.floor(tonumber(t[2]))
local ids, names, back = {}, {}, {}
for _, g in ipairs(heads) do
  if #ids >= want then break end
  local got = redis.call('LPOP', G .. 'r:' .. g, '1') or {}
  for _, id in ipairs(got) do ids[#ids + 1] = id end
  names[#names + 1] = g
  turn = turn + 1
  back[#back + 1] = string.format('%d', turn); back[#back + 1] = g
end
redis.call('ZADD', ring, unpack(back))
local v, za = redis.call('ZMSCORE', G .. 'depth', unpack(names)), {}
for i, g in ipairs(names) do za[#za + 1] = string.format('%d', tonumber(v[i]) + 1); za[#za + 1] = g end
redis.call('ZADD', G .. 'depth', unpack(za))
local a, hs = redis.call('HMGET', G .. 'act', unpack(names)), {}
for i, g in ipairs(names) do hs[#hs + 1] = g; hs[#hs + 1] = string.format('%d', (tonumber(a[i]) or 0) + 1) end
redis.call('HSET', G .. 'act', unpack(hs))
redis.call('HINCRBY', G .. 'stats', 'gready', string.format('%d', -#ids))
redis.call('EXISTS', ring)
return #ids
LUA
# the design's enqueue: the group's next tag and count in q (G..'vt'), the
# head of q, ZADD q at the tag, the counters, the doorbell's ZCARD
cat > "$OUT/new_enq.lua" <<'LUA'
local G, id, g = KEYS[1], ARGV[1], ARGV[2]
local S = 65536
redis.call('HSET', G .. 'job', id, g)
local v = redis.call('HMGET', G .. 'vt', g)[1]
local nt, inq = 0, 0
if v then
  local a, b = string.match(v, '^(%d+) (%d+)$')
  nt, inq = tonumber(a), tonumber(b)
end
local h = redis.call('ZRANGE', G .. 'q', 0, 0, 'WITHSCORES')
local hr = h[2] and math.floor(tonumber(h[2]) / S) * S or 0
local tag = math.max(nt, hr)
redis.call('ZADD', G .. 'q', string.format('%d', tag), id)
redis.call('HSET', G .. 'vt', g, string.format('%d %d', tag + S, inq + 1)) -- (weight 1: the next round)
redis.call('HINCRBY', G .. 'stats', 'gready', 1)
redis.call('ZADD', G .. 'depth', 'INCR', '-1', g)
redis.call('ZCARD', G .. 'q')
return tag
LUA
# the design's claim: ZRANGE + ZREMRANGEBYRANK of q, the jobs' groups, the
# groups' counts in q, then the per-claim writes of today's
cat > "$OUT/new_claim.lua" <<'LUA'
local G, want = KEYS[1], tonumber(ARGV[1])
redis.call('ZRANGEBYSCORE', G .. 'delayed', '-inf', '1764000000000', 'LIMIT', '0', '1000')
redis.call('EXISTS', G .. 'conf')
redis.call('EXISTS', G .. 'ring')
local ids = redis.call('ZRANGE', G .. 'q', 0, string.format('%d', want - 1))
if #ids == 0 then return 0 end
redis.call('ZREMRANGEBYRANK', G .. 'q', 0, string.format('%d', #ids - 1))
local of = redis.call('HMGET', G .. 'job', unpack(ids))
local cnt, names = {}, {}
for _, g in ipairs(of) do
  if not cnt[g] then cnt[g] = 0; names[#names + 1] = g end
  cnt[g] = cnt[g] + 1
end
local vt, vs = redis.call('HMGET', G .. 'vt', unpack(names)), {}
for i, g in ipairs(names) do
  local a, b = string.match(vt[i], '^(%d+) (%d+)$')
  vs[#vs + 1] = g; vs[#vs + 1] = a .. ' ' .. string.format('%d', tonumber(b) - cnt[g])
end
redis.call('HSET', G .. 'vt', unpack(vs))
local v, za = redis.call('ZMSCORE', G .. 'depth', unpack(names)), {}
for i, g in ipairs(names) do za[#za + 1] = string.format('%d', tonumber(v[i]) + cnt[g]); za[#za + 1] = g end
redis.call('ZADD', G .. 'depth', unpack(za))
local a, hs = redis.call('HMGET', G .. 'act', unpack(names)), {}
for i, g in ipairs(names) do hs[#hs + 1] = g; hs[#hs + 1] = string.format('%d', (tonumber(a[i]) or 0) + cnt[g]) end
redis.call('HSET', G .. 'act', unpack(hs))
redis.call('HINCRBY', G .. 'stats', 'gready', string.format('%d', -#ids))
return #ids
LUA

# the design's leaner variant: q's members "<group> <id>" (no HMGET of
# g:job in the claim), the group's next tag alone in G..'vt' and the
# round being served in its field '~' (one HMGET at the enqueue, no read
# of q's head), no count of the group's ids in q
cat > "$OUT/lean_enq.lua" <<'LUA'
local G, id, g = KEYS[1], ARGV[1], ARGV[2]
local S = 65536
redis.call('HSET', G .. 'job', id, g)
local v = redis.call('HMGET', G .. 'vt', g, '~')
local tag = math.max(tonumber(v[1]) or 0, tonumber(v[2]) or 0)
redis.call('ZADD', G .. 'q', string.format('%d', tag), g .. ' ' .. id)
redis.call('HSET', G .. 'vt', g, string.format('%d', tag + S))
redis.call('HINCRBY', G .. 'stats', 'gready', 1)
redis.call('ZADD', G .. 'depth', 'INCR', '-1', g)
redis.call('ZCARD', G .. 'q')
return tag
LUA
cat > "$OUT/lean_claim.lua" <<'LUA'
local G, want = KEYS[1], tonumber(ARGV[1])
local S = 65536
redis.call('ZRANGEBYSCORE', G .. 'delayed', '-inf', '1764000000000', 'LIMIT', '0', '1000')
redis.call('EXISTS', G .. 'conf')
redis.call('EXISTS', G .. 'ring')
local m = redis.call('ZRANGE', G .. 'q', 0, string.format('%d', want - 1))
if #m == 0 then return 0 end
redis.call('ZREMRANGEBYRANK', G .. 'q', 0, string.format('%d', #m - 1))
local h = redis.call('ZRANGE', G .. 'q', 0, 0, 'WITHSCORES')
if h[2] then redis.call('HSET', G .. 'vt', '~', string.format('%d', math.floor(tonumber(h[2]) / S) * S)) end
local ids, cnt, names = {}, {}, {}
for i, x in ipairs(m) do
  local g, id = string.match(x, '^(%S+) (.*)$')
  ids[i] = id
  if not cnt[g] then cnt[g] = 0; names[#names + 1] = g end
  cnt[g] = cnt[g] + 1
end
local v, za = redis.call('ZMSCORE', G .. 'depth', unpack(names)), {}
for i, g in ipairs(names) do za[#za + 1] = string.format('%d', tonumber(v[i]) + cnt[g]); za[#za + 1] = g end
redis.call('ZADD', G .. 'depth', unpack(za))
local a, hs = redis.call('HMGET', G .. 'act', unpack(names)), {}
for i, g in ipairs(names) do hs[#hs + 1] = g; hs[#hs + 1] = string.format('%d', (tonumber(a[i]) or 0) + cnt[g]) end
redis.call('HSET', G .. 'act', unpack(hs))
redis.call('HINCRBY', G .. 'stats', 'gready', string.format('%d', -#ids))
return #ids
LUA

cg_redis_start "$P" turnq_proto.sh
pid=$CG_REDIS_PID
# (the server's own clock-driven work out of the window: one cron a second,
# no active rehashing)
redis-cli -p "$P" CONFIG SET hz 1 > /dev/null
redis-cli -p "$P" CONFIG SET activerehashing no > /dev/null
declare -A sha
for s in old_enq old_claim new_enq new_claim lean_enq lean_claim; do
  sha[$s]=$(redis-cli -p "$P" -x SCRIPT LOAD < "$OUT/$s.lua")
done
measure() { # tag file
  callgrind_control -z "$pid" > /dev/null 2>&1
  redis-cli -p "$P" < "$2" > "$OUT/$1.out"
  callgrind_control --dump="$1" "$pid" > /dev/null 2>&1
  cg_dumped "$1"
}
# the idle cost of a file of PINGs as long as the ones measured: redis-cli's
# commands themselves, subtracted
jobs=$((NG * PER))
claims=$((jobs / 4 / WANT)) # (twice, half the jobs: no group runs dry)
for v in old new lean; do
  G="{t$v}:g:"
  # (g:act pinned a hashtable, as GROUPS.count's ACT_PIN does)
  redis-cli -p "$P" HSET "${G}act" '~' "$(printf 'x%.0s' $(seq 80))" > /dev/null
  for ((i = 1; i <= jobs; i++)); do
    echo "EVALSHA ${sha[${v}_enq]} 1 $G j$i g$((i % NG))"
  done > "$OUT/enq_$v.txt"
  for ((i = 1; i <= claims; i++)); do echo "EVALSHA ${sha[${v}_claim]} 1 $G $WANT"; done > "$OUT/claim_$v.txt"
done
for ((i = 1; i <= jobs; i++)); do echo "PING"; done > "$OUT/ping_enq.txt"
for ((i = 1; i <= claims; i++)); do echo "PING"; done > "$OUT/ping_claim.txt"
declare -A r
r[ping_enq]=$(measure ping_enq "$OUT/ping_enq.txt")
r[ping_claim]=$(measure ping_claim "$OUT/ping_claim.txt")
for v in old new lean; do
  r[enq_$v]=$(measure "enq_$v" "$OUT/enq_$v.txt")
  redis-cli -p "$P" < "$OUT/claim_$v.txt" > /dev/null # (unmeasured: the first claims)
  r[claim_$v]=$(measure "claim_$v" "$OUT/claim_$v.txt")
done
grep -v '^[0-9]*$' "$OUT"/claim_*.out "$OUT"/enq_*.out | head -3 >&2 || true
per() { awk -v x="$1" -v s="$2" -v n="$3" 'BEGIN { printf "%.1fk", (x - s) / n / 1000 }'; }
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') under callgrind; $NG groups x $PER jobs (job i in group i mod $NG), $claims claims of $WANT; output in $OUT"
echo
echo "| Redis instructions per job (less a PING's) | today (lists, ring) | turn queue (design) | turn queue, leaner |"
echo "|---|---:|---:|---:|"
echo "| enqueue's group step | $(per "${r[enq_old]}" "${r[ping_enq]}" $jobs) | $(per "${r[enq_new]}" "${r[ping_enq]}" $jobs) | $(per "${r[enq_lean]}" "${r[ping_enq]}" $jobs) |"
echo "| claim's group step | $(per "${r[claim_old]}" "${r[ping_claim]}" $((claims * WANT))) | $(per "${r[claim_new]}" "${r[ping_claim]}" $((claims * WANT))) | $(per "${r[claim_lean]}" "${r[ping_claim]}" $((claims * WANT))) |"

# the unit costs (keys of their own: {u}...)
for ((i = 1; i <= 1000; i++)); do
  echo "HSET {u}h f$i $i"; echo "ZADD {u}z $i f$i"
done | redis-cli -p "$P" > /dev/null
f25=$(for i in $(seq 1 25); do printf "'f%d'," $((i * 37)); done)
f25=${f25%,}
declare -A U=(
  [a]="return 1"
  [b]="redis.call('EXISTS', KEYS[1] .. 'h') return 1"
  [c]="redis.call('HMGET', KEYS[1] .. 'h', 'f5') return 1"
  [d]="redis.call('HMGET', KEYS[1] .. 'h', $f25) return 1"
  [e]="redis.call('ZMSCORE', KEYS[1] .. 'z', $f25) return 1"
  [f]="redis.call('RPUSH', KEYS[1] .. 'l', 'a') redis.call('RPUSH', KEYS[1] .. 'l', 'a') return 1"
  [g]="redis.call('LPOP', KEYS[1] .. 'l', '1') redis.call('RPUSH', KEYS[1] .. 'l', 'a') return 1"
)
declare -A UN=(
  [a]="a script call (return 1)" [b]="+ one EXISTS" [c]="+ one HMGET of 1 field"
  [d]="+ one HMGET of 25 fields" [e]="+ one ZMSCORE of 25 members (scores printed)"
  [f]="+ two RPUSHes of one id" [g]="+ an LPOP of one id and an RPUSH"
)
U_N=200
for ((i = 1; i <= U_N; i++)); do echo PING; done > "$OUT/ping_u.txt"
ub=$(measure ping_u "$OUT/ping_u.txt")
echo
echo "| inside a script (EVALSHA less a PING, instructions per call) | |"
echo "|---|---:|"
for k in a b c d e f g; do
  s=$(redis-cli -p "$P" SCRIPT LOAD "${U[$k]}")
  for ((i = 1; i <= U_N; i++)); do echo "EVALSHA $s 1 {u}"; done > "$OUT/u_$k.txt"
  echo "| ${UN[$k]} | $(per "$(measure "u_$k" "$OUT/u_$k.txt")" "$ub" $U_N) |"
done
