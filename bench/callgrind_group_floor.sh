#!/bin/bash
# bench/callgrind_group_floor.sh: the least Redis can spend on a drained
# group job, today's group keys against a layout where a group's ready ids
# and depth are read with the ring (bench/README.md "The group claim's
# floor"; docs/scripts.md "The group heads").
#
# Throwaway stand-in, as bench/callgrind_drain_floor.sh: a Lua library
# whose claim and completion run only the fewest commands of each layout,
# on a redis-server under callgrind, N jobs a call (BATCH, 25: the drain's
# real batching). What all cases share (the +read floor of
# callgrind_drain_floor.sh: HMGET payloads, TIME, ZADD leases, HMGET and
# HSET state; the completion's state check, ZREM leases, HSET state, RPUSH
# completed) is the `plain` case; each group case takes its ids from
# GROUPS_N groups (1000, jobs spread round-robin) instead of ready:
#
#   plain   LPOP ready N.
#   lists   today's keys (groups_lib.lua): ZRANGE ring heads (+8 spare),
#           ZRANGE ring's last turn, one LPOP r:<g> per group visited,
#           ZADD ring (turns as text), ZMSCORE + ZADD depth, HMGET + HSET
#           act, HINCRBY gready (ZREM ring/depth for groups emptied).
#           Completion: HMGET job (the jobs' groups), HMGET act, HSET/HDEL
#           act, EXISTS r:<g> of groups with nothing running (tidy), HDEL job.
#   lring   lists with the ring a list (LPOP ring N, RPUSH of the groups
#           with work left: no turns printed or parsed).
#   heads   the new layout: one hash G..'h', field <g> -> "<act> <depth>
#           <id> <id> ..." (its running count, its ready depth and its first
#           HEADS ready ids, 8; the rest in r:<g>, refilled by one
#           LPOP r:<g> HEADS when the field's ids run out). Claim: ZRANGE
#           ring 0 N-1 (a group in the ring has ready ids: no spares),
#           ZRANGE ring's last turn, HMGET h of the groups (ids, depth and
#           running count in one field each), HSET h, ZADD ring, ZADD depth
#           (the depth known: no ZMSCORE), HINCRBY gready. Completion:
#           HMGET job, HMGET h, HSET h (or HDEL of a group with nothing
#           left: its depth is known, no EXISTS), HDEL job.
#   lean    heads, and the ring a list (LPOP ring N, RPUSH of the groups
#           with work left: no turns printed or parsed; weights would be
#           entries repeated).
#   bare    no promise but round-robin: the ring a list, a field of ids
#           only ("<id> <id> ..."; HDEL when its ids and r:<g> ran out),
#           no depth index, no running count, no gready; the completion
#           the plain one (the bound below any layout of per-group keys).
#   (A first version of lean carried the job's group in its state text
#   instead of G..'job': 98.2k, its per-job string.match of the group at
#   both ends dearer than the hash's fields; dropped.)
#
# Each case: DRAIN_N jobs (10000) laid out unmeasured, then claims and
# completions one at a time on one connection, measured between callgrind
# zero and dump, less the idle server's rate; instructions per job, the
# claim measured alone too (the completion is the difference).
#
# Usage: bench/callgrind_group_floor.sh [case ...]   (default: all six)
# Environment: DRAIN_N (10000), BATCH (25), GROUPS_N (1000), HEADS (8),
# CG_PORT (17447), OUT (mktemp)
set -euo pipefail
DRAIN_N=${DRAIN_N:-10000}
BATCH=${BATCH:-25}
GROUPS_N=${GROUPS_N:-1000}
HEADS=${HEADS:-8}
CG_PORT=${CG_PORT:-17447}
OUT=${OUT:-$(mktemp -d /tmp/rjq-gfloor.XXXXXX)}
PY=/usr/bin/python3
# shellcheck source=bench/cg_redis.sh
. "$(dirname "$0")/cg_redis.sh"
mkdir -p "$OUT"
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(plain lists lring heads lean bare)

cat > "$OUT/gfloor.lua" << 'EOF'
#!lua name=rjqgfloor
-- KEYS: ready, payloads, leases, completed, state, G (the groups' prefix)
-- claim ARGV: n, token, lease ms, mode, heads; complete ARGV: token, mode, ids
local PIN = 'rjq: keeps this set a skiplist (longer than zset-max-listpack-value)'
local function now()
  local t = redis.call('TIME')
  return t[1] .. string.sub(string.format('%06d', t[2]), 1, 3)
end
-- the group step of a claim (today's keys): the ids
local function take_lists(G, n, lr)
  local ring = G .. 'ring'
  local heads, turn
  if lr then
    heads = redis.call('LPOP', ring, string.format('%d', n))
    if not heads then return {} end
  else
    heads = redis.call('ZRANGE', ring, '0', string.format('%d', n + 7))
    if #heads == 0 then return {} end
    turn = tonumber(redis.call('ZRANGE', ring, '-1', '-1', 'WITHSCORES')[2])
  end
  local ids, names, back = {}, {}, {}
  for _, g in ipairs(heads) do
    if #ids >= n then break end
    local id = redis.call('LPOP', G .. 'r:' .. g)
    if id then ids[#ids + 1] = id; names[#names + 1] = g end
  end
  local v = redis.call('ZMSCORE', G .. 'depth', unpack(names))
  local za, zr = {}, {}
  for i, g in ipairs(names) do
    local d = tonumber(v[i]) + 1
    if d < 0 then
      if lr then back[#back + 1] = g
      else turn = turn + 1; back[#back + 1] = string.format('%d', turn); back[#back + 1] = g end
      za[#za + 1] = string.format('%d', d); za[#za + 1] = g
    else
      zr[#zr + 1] = g
    end
  end
  if #back > 0 then redis.call(lr and 'RPUSH' or 'ZADD', ring, unpack(back)) end
  if #za > 0 then redis.call('ZADD', G .. 'depth', unpack(za)) end
  if #zr > 0 then
    if not lr then redis.call('ZREM', ring, unpack(zr)) end
    redis.call('ZREM', G .. 'depth', unpack(zr))
  end
  local a, hs = redis.call('HMGET', G .. 'act', unpack(names)), {}
  for i, g in ipairs(names) do hs[2 * i - 1] = g; hs[2 * i] = string.format('%d', (tonumber(a[i]) or 0) + 1) end
  redis.call('HSET', G .. 'act', unpack(hs))
  redis.call('HINCRBY', G .. 'stats', 'gready', string.format('%d', -#ids))
  return ids
end
-- heads: one field per group, "<act> <depth> <ids>"
local function take_heads(G, n, K, lean)
  local ring, names = G .. 'ring', nil
  local t
  if lean then
    names = redis.call('LPOP', ring, string.format('%d', n))
    if not names then return {} end
  else
    names = redis.call('ZRANGE', ring, '0', string.format('%d', n - 1))
    if #names == 0 then return {} end
    t = tonumber(redis.call('ZRANGE', ring, '-1', '-1', 'WITHSCORES')[2])
  end
  local f = redis.call('HMGET', G .. 'h', unpack(names))
  local ids, hs, back, za, zr = {}, {}, {}, {}, {}
  for i, g in ipairs(names) do
    local a, d, rest = string.match(f[i], '^(%d+) (%d+) (.*)$')
    local sp = string.find(rest, ' ', 1, true)
    local id
    if sp then id = string.sub(rest, 1, sp - 1); rest = string.sub(rest, sp + 1)
    else id = rest; rest = '' end
    ids[i] = id
    d = d - 1
    if d > 0 and rest == '' then
      rest = table.concat(redis.call('LPOP', G .. 'r:' .. g, K), ' ')
    end
    local ds = string.format('%d', d)
    hs[2 * i - 1] = g; hs[2 * i] = string.format('%d', a + 1) .. ' ' .. ds .. ' ' .. rest
    if d > 0 then
      if lean then back[#back + 1] = g
      else t = t + 1; back[#back + 1] = string.format('%d', t); back[#back + 1] = g end
      za[#za + 1] = '-' .. ds; za[#za + 1] = g
    else
      zr[#zr + 1] = g
    end
  end
  redis.call('HSET', G .. 'h', unpack(hs))
  if #back > 0 then
    if lean then redis.call('RPUSH', ring, unpack(back)) else redis.call('ZADD', ring, unpack(back)) end
  end
  if #za > 0 then redis.call('ZADD', G .. 'depth', unpack(za)) end
  if #zr > 0 then
    if not lean then redis.call('ZREM', ring, unpack(zr)) end
    redis.call('ZREM', G .. 'depth', unpack(zr))
  end
  redis.call('HINCRBY', G .. 'stats', 'gready', string.format('%d', -#ids))
  return ids
end
-- bare: round-robin alone (a list ring, a field of ids per group)
local function take_bare(G, n, K)
  local ring = G .. 'ring'
  local names = redis.call('LPOP', ring, string.format('%d', n))
  if not names then return {} end
  local f = redis.call('HMGET', G .. 'h', unpack(names))
  local ids, hs, hd, back = {}, {}, {}, {}
  for i, g in ipairs(names) do
    local rest = f[i]
    local sp = string.find(rest, ' ', 1, true)
    local id
    if sp then id = string.sub(rest, 1, sp - 1); rest = string.sub(rest, sp + 1)
    else id = rest; rest = '' end
    ids[i] = id
    if rest == '' then
      local more = redis.call('LPOP', G .. 'r:' .. g, K)
      if more then rest = table.concat(more, ' ') end
    end
    if rest == '' then hd[#hd + 1] = g
    else hs[#hs + 1] = g; hs[#hs + 1] = rest; back[#back + 1] = g end
  end
  if #hs > 0 then redis.call('HSET', G .. 'h', unpack(hs)) end
  if #hd > 0 then redis.call('HDEL', G .. 'h', unpack(hd)) end
  if #back > 0 then redis.call('RPUSH', ring, unpack(back)) end
  return ids
end
redis.register_function('claim', function(KEYS, ARGV)
  local n, tok, lease, mode = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
  local ids
  if mode == 'plain' then ids = redis.call('LPOP', KEYS[1], ARGV[1]) or {}
  elseif mode == 'lists' or mode == 'lring' then ids = take_lists(KEYS[6], n, mode == 'lring')
  elseif mode == 'bare' then ids = take_bare(KEYS[6], n, ARGV[5])
  else ids = take_heads(KEYS[6], n, ARGV[5], mode == 'lean') end
  if #ids == 0 then return {} end
  local pay = redis.call('HMGET', KEYS[2], unpack(ids))
  local t = now()
  local deadline = string.format('%d', tonumber(t) + tonumber(lease))
  local za, out = {'+inf', PIN}, {}
  for i, id in ipairs(ids) do
    za[2 * i + 1] = deadline; za[2 * i + 2] = id .. ' ' .. tok
    out[2 * i - 1] = id; out[2 * i] = pay[i]
  end
  redis.call('ZADD', KEYS[3], unpack(za))
  local s = redis.call('HMGET', KEYS[5], unpack(ids))
  local st, last, v = {}, nil, nil
  for i, id in ipairs(ids) do
    if s[i] ~= last then
      last = s[i]
      local a, q, rest = string.match(last, '^ready (%d+) @(%d*),,(.*)$')
      v = 'active ' .. (a + 1) .. ' ' .. tok .. ' @' .. q .. ',' .. t .. ',' .. rest
    end
    st[2 * i - 1] = id; st[2 * i] = v
  end
  redis.call('HSET', KEYS[5], unpack(st))
  return out
end)
redis.register_function('complete', function(KEYS, ARGV)
  local tok, mode, ids = ARGV[1], ARGV[2], {}
  for j = 3, #ARGV do ids[#ids + 1] = ARGV[j] end
  local G = KEYS[6]
  local t = now()
  local out, gone, st, rm, grp = {}, {}, {}, {}, {}
  local s = redis.call('HMGET', KEYS[5], unpack(ids))
  local head = 'active 1 ' .. tok .. ' '
  local last, v
  for i, id in ipairs(ids) do
    local sv = s[i]
    if sv and (sv == last or string.sub(sv, 1, #head) == head) then
      if sv ~= last then last = sv; v = 'completed' .. string.sub(sv, 7) .. t end
      gone[#gone + 1] = id; rm[#rm + 1] = id .. ' ' .. tok
      st[2 * #gone - 1] = id; st[2 * #gone] = v
      out[i] = 1
    else
      out[i] = 0
    end
  end
  if #rm > 0 then redis.call('ZREM', KEYS[3], unpack(rm)) end
  if #st > 0 then redis.call('HSET', KEYS[5], unpack(st)) end
  if #gone > 0 then redis.call('RPUSH', KEYS[4], t .. ' ' .. table.concat(gone, ' ')) end
  if mode == 'plain' or mode == 'bare' or #gone == 0 then return out end
  grp = redis.call('HMGET', G .. 'job', unpack(gone))
  local cnt, names = {}, {}
  for _, g in ipairs(grp) do
    if not cnt[g] then cnt[g] = 0; names[#names + 1] = g end
    cnt[g] = cnt[g] + 1
  end
  if mode == 'lists' or mode == 'lring' then
    local a = redis.call('HMGET', G .. 'act', unpack(names))
    local hs, hd = {}, {}
    for i, g in ipairs(names) do
      local c = tonumber(a[i]) - cnt[g]
      if c > 0 then hs[#hs + 1] = g; hs[#hs + 1] = string.format('%d', c) else hd[#hd + 1] = g end
    end
    if #hs > 0 then redis.call('HSET', G .. 'act', unpack(hs)) end
    if #hd > 0 then
      redis.call('HDEL', G .. 'act', unpack(hd))
      local ks = {}
      for i, g in ipairs(hd) do ks[i] = G .. 'r:' .. g end
      redis.call('EXISTS', unpack(ks)) -- (GROUPS.tidy's common case)
    end
  else
    local f = redis.call('HMGET', G .. 'h', unpack(names))
    local hs, hd = {}, {}
    for i, g in ipairs(names) do
      local a, rest = string.match(f[i], '^(%d+) (.*)$')
      local c = a - cnt[g]
      if c == 0 and rest == '0 ' then hd[#hd + 1] = g
      else hs[#hs + 1] = g; hs[#hs + 1] = string.format('%d', c) .. ' ' .. rest end
    end
    if #hs > 0 then redis.call('HSET', G .. 'h', unpack(hs)) end
    if #hd > 0 then redis.call('HDEL', G .. 'h', unpack(hd)) end
  end
  redis.call('HDEL', G .. 'job', unpack(gone))
  return out
end)
-- the layout, unmeasured: n jobs, job i in group i % ng, K ids a field
redis.register_function('fill', function(KEYS, ARGV)
  local n, ng, mode, K = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
  local G = KEYS[6]
  local per = {}
  for i = 1, n do
    local id, g = tostring(i), 'tenant' .. (i % ng)
    redis.call('HSET', KEYS[2], id, 'xxxxxxxxxxxxxxxxxx')
    redis.call('HSET', KEYS[5], id, 'ready 0 @1764000000000,,')
    if mode == 'plain' then redis.call('RPUSH', KEYS[1], id)
    else
      if not per[g] then per[g] = {}; per[#per + 1] = g end
      table.insert(per[g], id)
      if mode ~= 'bare' then redis.call('HSET', G .. 'job', id, g) end
    end
  end
  for turn, g in ipairs(per) do
    local l = per[g]
    if mode == 'lists' or mode == 'lring' then
      redis.call('RPUSH', G .. 'r:' .. g, unpack(l))
    else
      local h = {}
      for j = 1, math.min(K, #l) do h[j] = l[j] end
      for j = K + 1, #l do redis.call('RPUSH', G .. 'r:' .. g, l[j]) end
      if mode == 'bare' then redis.call('HSET', G .. 'h', g, table.concat(h, ' '))
      else redis.call('HSET', G .. 'h', g, '0 ' .. #l .. ' ' .. table.concat(h, ' ')) end
    end
    if mode == 'lean' or mode == 'bare' or mode == 'lring' then redis.call('RPUSH', G .. 'ring', g)
    else redis.call('ZADD', G .. 'ring', turn, g) end
    if mode ~= 'bare' then redis.call('ZADD', G .. 'depth', -#l, g) end
  end
  if mode == 'lists' or mode == 'lring' then redis.call('HSET', G .. 'act', '~', PIN) end
  return n
end)
EOF

cat > "$OUT/drive.py" << 'EOF'
# drive.py port n batch case phase groups heads
import sys
from cg_resp import Conn
port, n, batch, case, phase, ng, heads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
call = Conn(port).call
keys = ['{q}:ready', '{q}:payloads', '{q}:leases', '{q}:completed', '{q}:state', '{q}:g:']
if phase == 'fill':
    call('FLUSHALL')
    call('FCALL', 'fill', len(keys), *keys, n, ng, case, heads)
    sys.exit(0)
k, done = 0, 0
while done < n:
    k += 1
    tok = 'c.w.t%d' % k
    r = call('FCALL', 'claim', len(keys), *keys, batch, tok, 30000, case, heads)
    ids = r[0::2]
    if not ids: break
    done += len(ids)
    if phase == 'run':
        c = call('FCALL', 'complete', len(keys), *keys, tok, case, *ids)
        assert all(x == 1 for x in c), c
assert done == n, (done, n)
print(done)
EOF

cg_redis_start "$CG_PORT" callgrind_group_floor.sh
redis-cli -p "$CG_PORT" -x FUNCTION LOAD < "$OUT/gfloor.lua" > /dev/null

# the idle server's rate (cron, valgrind's clock), subtracted
idle=$(cg_idle_rate 3)

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') under callgrind, $DRAIN_N jobs over $GROUPS_N groups, $BATCH a call, $HEADS ids a head field, output in $OUT"
echo "idle server: $idle instructions/s (subtracted)"
echo
echo "| case | Redis instr/job | of which the claim | the completion |"
echo "|---|---:|---:|---:|"
for c in "${cases[@]}"; do cg_drain_row "$c" "$GROUPS_N" "$HEADS"; done
