-- history: add one flush of a process's counts to the queue's history
-- (src/history.c): the minute and the hour of the server's clock now, in
-- the rings histm (a day of minutes) and histh (30 days of hours). One
-- call per queue with activity per flush interval (never per job); the
-- counts of every process and shard merge by addition.
-- KEYS (src/keys.def; bound to these locals): histm histh
-- ARGV: 1 the number of counts N, 2 .. N+1 the counts to add (enqueued,
--       completed, failed, wait sum ms, run sum ms, the wait buckets, the
--       run buckets: rjq.h RJQ_HISTORY_BUCKETS each), N+2 the minute ring's
--       expiry (ms), N+3 the hour ring's
-- histh's field "total" adds up every flush (minute 0: never a lap), for
-- counters that only grow (rjq serve's /metrics histograms).
-- A slot's value: "<minute or hour> <the N counts>"; a slot holding an
-- older minute (the ring came round) starts again from zero. A slot
-- holding a later one (the server's clock was set back) takes the counts
-- as they are: nothing is lost.
-- Returns the minute the counts went to.
-- Every slot is read (HMGET, type-checked: a wrongly typed ring is
-- refused naming it) and every argument checked before the first write:
-- nothing is written by a call that is refused.
local EXACT_MAX = 9007199254740992 -- 2^53
local function count(v, what)
  local x = string.match(v or '', '^%d+$') and tonumber(v)
  if not x or x >= EXACT_MAX then error({err = 'ERR history: bad ' .. what}) end
  return x
end
local n = tonumber(ARGV[1])
if not n or n < 1 or n > 200 then error({err = 'ERR history: bad count'}) end
local add = {}
for i = 1, n do add[i] = count(ARGV[i + 1], 'number') end
local ttlm, ttlh = count(ARGV[n + 2], 'expiry'), count(ARGV[n + 3], 'expiry')
local now = now_ms()
-- The new value of key's slot (the minute or hour now; step nil: the
-- totals), read now, written by write() once every read is done.
local function bump(key, step, slots)
  local at = step and math.floor(now / step) or 0
  local slot = step and int(at % slots) or 'total'
  local v = typed('hash', 'HMGET', key, slot)[1]
  local cur = {}
  if v then for w in string.gmatch(v, '%d+') do cur[#cur + 1] = tonumber(w) end end
  if #cur ~= n + 1 or cur[1] < at then
    cur = {at}
    for i = 1, n do cur[i + 1] = 0 end
  end
  local out = {int(cur[1])}
  for i = 1, n do out[i + 1] = int(cur[i + 1] + add[i]) end
  return {key, slot, table.concat(out, ' '), at}
end
local function write(b, ttl)
  redis.call('HSET', b[1], b[2], b[3])
  redis.call('PEXPIRE', b[1], ttl)
end
local m, h, t = bump(histm, 60000, 1440), bump(histh, 3600000, 720), bump(histh, nil, nil)
write(m, ttlm)
write(h, ttlh)
write(t, ttlh) -- the totals (Prometheus' counters)
return m[4]
