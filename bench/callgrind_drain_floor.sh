#!/bin/bash
# bench/callgrind_drain_floor.sh: the least Redis can spend on a drained job
# with rjq's promises (bench/README.md "The drain's floor").
#
# bench/callgrind.sh rjq-drain measures rjq's claim.lua and complete.lua in
# a drain (tiny jobs, c=50: ~25-50 jobs a call); this measures, on the same
# kind of redis-server under callgrind, stand-in drains whose scripts do
# nothing but the fewest commands that keep the issue's guarantees, with
# N jobs a call (BATCH, 50):
#
#   lease   claim: LPOP ready N (the ids, once), HMGET payloads, TIME,
#           ZADD leases <deadline> "<id> <token>" for each (a lease and a
#           fencing token per job in one entry); reply id, payload a job.
#           complete: TIME, ZMSCORE leases of each "<id> <token>" (the
#           check, per job), ZREM of those held (the release), RPUSH
#           completed one retention entry for the call; a code per job.
#   +state  lease, and the job's state written at its start and its end
#           (HSET state: "active <attempt> <token> @<enq>,<start>," then
#           "completed ... <end>", as rjq's state column keeps them: what
#           `rjq job`, retries and the sweeps read).
#   +read   +state, and each state read before it is written (HMGET
#           state at the claim: the attempt count and enqueue time; at the
#           completion: the token check is the state's, as rjq's is).
#   args    +read, with the completion's id and tail sent as rjq sends
#           them (per job: id and result; per run: "<attempt> <token>"
#           and the count) and the call's fixed arguments of rjq's claim
#           (11) and completion (5 + one offer), keys as rjq passes them
#           (claim 16, completion 19).
#
# Each case: DRAIN_N jobs (20000) enqueued unmeasured (ids in ready, an
# 18-byte payload each, state "ready 0 @<ms>,,"), then claims and
# completions one at a time on one connection (a small Python client),
# measured between callgrind_control zero and dump, less the idle server's
# rate over the same time; instructions per job, and per call of each
# script where the claim or the completion is run alone.
#
# Usage: bench/callgrind_drain_floor.sh [case ...]   (default: all four)
# Environment: DRAIN_N (20000), BATCH (50), CG_PORT (17443), OUT (mktemp),
#   DFLOOR_FILES_ONLY (1: write the stand-ins to OUT and stop)
set -euo pipefail
DRAIN_N=${DRAIN_N:-20000}
BATCH=${BATCH:-50}
CG_PORT=${CG_PORT:-17443}
OUT=${OUT:-$(mktemp -d /tmp/rjq-dfloor.XXXXXX)}
PY=/usr/bin/python3
# shellcheck source=bench/cg_redis.sh
. "$(dirname "$0")/cg_redis.sh"
mkdir -p "$OUT"
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(lease +state +read args)

cat > "$OUT/dfloor.lua" << 'EOF'
#!lua name=rjqdfloor
-- KEYS: ready, payloads, leases, completed, state (the rest: unused, as
-- rjq's other keys); ARGV claim: n, token, lease ms, mode; complete:
-- token, mode, then the ids (mode 'args': 7 fillers, tail, count, then id, result)
-- mode: 'lease', '+state', '+read', 'args'
local PIN = 'rjq: keeps this set a skiplist (longer than zset-max-listpack-value)'
local function now()
  local t = redis.call('TIME')
  return t[1] .. string.sub(string.format('%06d', t[2]), 1, 3) -- (ms, as text)
end
redis.register_function('claim', function(KEYS, ARGV)
  local n, tok, lease, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
  local ids = redis.call('LPOP', KEYS[1], n)
  if not ids then return {} end
  local pay = redis.call('HMGET', KEYS[2], unpack(ids))
  local t = now()
  local deadline = string.format('%d', tonumber(t) + tonumber(lease)) -- (text: a Lua number goes to Redis through %.17g)
  -- (the pin keeps the set a skiplist, as rjq's ACTIVE_PIN: a listpack
  -- of up to 128 entries is scanned by every ZADD and ZREM, ~14k a job)
  local za, out = {'+inf', PIN}, {}
  for i, id in ipairs(ids) do
    za[2 * i + 1] = deadline; za[2 * i + 2] = id .. ' ' .. tok
    out[2 * i - 1] = id; out[2 * i] = pay[i]
  end
  redis.call('ZADD', KEYS[3], unpack(za))
  if mode ~= 'lease' then
    local st = {}
    if mode == '+state' then
      for i, id in ipairs(ids) do
        st[2 * i - 1] = id; st[2 * i] = 'active 1 ' .. tok .. ' @1764000000000,' .. t .. ','
      end
    else
      local s = redis.call('HMGET', KEYS[5], unpack(ids))
      local last, v
      for i, id in ipairs(ids) do
        if s[i] ~= last then
          last = s[i]
          local a, q = string.match(last, '^ready (%d+) @(%d*),')
          v = 'active ' .. (a + 1) .. ' ' .. tok .. ' @' .. q .. ',' .. t .. ','
        end
        st[2 * i - 1] = id; st[2 * i] = v
      end
    end
    redis.call('HSET', KEYS[5], unpack(st))
  end
  return out
end)
redis.register_function('complete', function(KEYS, ARGV)
  local tok, mode, ids, from = ARGV[1], ARGV[2], {}, 3
  if mode == 'args' then -- (ARGV 3-9: rjq's fixed arguments and an offer)
    tok = string.match(ARGV[10], ' (.*)$')
    for j = 12, #ARGV, 2 do ids[#ids + 1] = ARGV[j] end
  else
    for j = from, #ARGV do ids[#ids + 1] = ARGV[j] end
  end
  local t = now()
  local out, gone, st = {}, {}, {}
  if mode == 'lease' or mode == '+state' then
    local m = {}
    for i, id in ipairs(ids) do m[i] = id .. ' ' .. tok end
    local sc = redis.call('ZMSCORE', KEYS[3], unpack(m))
    local rm = {}
    for i, id in ipairs(ids) do
      if sc[i] then rm[#rm + 1] = m[i]; gone[#gone + 1] = id; out[i] = 1 else out[i] = 0 end
    end
    if #rm > 0 then redis.call('ZREM', KEYS[3], unpack(rm)) end
    if mode == '+state' then
      for i, id in ipairs(gone) do
        st[2 * i - 1] = id; st[2 * i] = 'completed 1 ' .. tok .. ' @1764000000000,1764000000001,' .. t
      end
    end
  else
    -- the state's head is the check (as complete.lua's), the lease entry
    -- is released with it
    local s = redis.call('HMGET', KEYS[5], unpack(ids))
    local head, rm = 'active 1 ' .. tok .. ' ', {}
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
  end
  if #st > 0 then redis.call('HSET', KEYS[5], unpack(st)) end
  if #gone > 0 then redis.call('RPUSH', KEYS[4], t .. ' ' .. table.concat(gone, ' ')) end
  return out
end)
EOF

cat > "$OUT/drive.py" << 'EOF'
# drive.py port n batch case phase [depth]: RESP over one socket, one call
# at a time; with depth (bench/native_drain_floor.sh, phase run), depth
# calls in flight on it: each claim's reply sends its completion, each
# completion's reply the next claim (a worker holding depth batches, as
# rjq's at c=50 holds ~2 of ~25); then prints the jobs and the seconds
import sys
from cg_resp import Conn
port, n, batch, case, phase = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
conn = Conn(port)
call = conn.call
keys = ['{q}:ready', '{q}:payloads', '{q}:leases', '{q}:completed', '{q}:state']
def claim_keys(): return keys + ['{q}:k%d' % i for i in range(6, 17)] if case == 'args' else keys
def complete_keys(): return keys + ['{q}:k%d' % i for i in range(6, 20)] if case == 'args' else keys
def claim(tok):  # a claim's FCALL words
    ck = claim_keys()
    extra = ['0', '1', '0', '0', '1', '0', '0'] if case == 'args' else []
    return ['FCALL', 'claim', len(ck), *ck, batch, tok, 30000, case, *extra]
def complete(tok, ids):  # a completion's FCALL words
    cmk = complete_keys()
    if case == 'args':
        a = [tok, 'args', '-1', '0', '1', '0', 'w', '1', '30000', '1 ' + tok, len(ids)]
        for i in ids: a += [i, b'']
    else:
        a = [tok, case] + ids
    return ['FCALL', 'complete', len(cmk), *cmk, *a]
if phase == 'fill':
    call('FLUSHALL')
    call('EVAL', "for i = 1, tonumber(ARGV[1]) do local id = tostring(i); redis.call('RPUSH', KEYS[1], id); "
         "redis.call('HSET', KEYS[2], id, 'xxxxxxxxxxxxxxxxxx'); redis.call('HSET', KEYS[5], id, 'ready 0 @1764000000000,,') end",
         5, *keys, n)
    sys.exit(0)
k, done = 0, 0
if len(sys.argv) > 6:  # phase run, depth calls in flight
    import collections, time
    pend, more = collections.deque(), True  # (a claim's token, or None: a completion)
    t0 = time.monotonic()
    for _ in range(int(sys.argv[6])):
        k += 1; pend.append('c.w.t%d' % k); conn.send(*claim(pend[-1]))
    while pend:
        tok, r = pend.popleft(), conn.read()
        if tok is None:
            assert all(x == 1 for x in r), r
            if more:
                k += 1; pend.append('c.w.t%d' % k); conn.send(*claim(pend[-1]))
            continue
        ids = r[0::2]
        if not ids:
            more = False
            continue
        done += len(ids)
        pend.append(None); conn.send(*complete(tok, ids))
    print(done, '%.6f' % (time.monotonic() - t0))
    sys.exit(0)
# phase: run (claim + complete) or claim (claims only: completions done unmeasured after)
while done < n:
    k += 1
    tok = 'c.w.t%d' % k
    r = call(*claim(tok))
    ids = r[0::2]
    if not ids: break
    done += len(ids)
    if phase == 'run':
        c = call(*complete(tok, ids))
        assert all(x == 1 for x in c), c
print(done)
EOF

# DFLOOR_FILES_ONLY=1: write the stand-ins ($OUT/dfloor.lua, $OUT/drive.py)
# and stop (bench/native_drain_floor.sh runs them on a server not under
# callgrind)
[ "${DFLOOR_FILES_ONLY:-0}" != 1 ] || exit 0

cg_redis_start "$CG_PORT" callgrind_drain_floor.sh
redis-cli -p "$CG_PORT" -x FUNCTION LOAD < "$OUT/dfloor.lua" > /dev/null

# the idle server's rate (cron, valgrind's clock), subtracted
idle=$(cg_idle_rate 3)

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') under callgrind, $DRAIN_N jobs, $BATCH a call, output in $OUT"
echo "idle server: $idle instructions/s (subtracted)"
echo
echo "| case | Redis instr/job | of which the claim | the completion |"
echo "|---|---:|---:|---:|"
for c in "${cases[@]}"; do cg_drain_row "$c"; done
