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
local n = tonumber(ARGV[1])
if not n or n < 1 or n > 200 then error({err = 'ERR history: bad count'}) end
local add = {}
for i = 1, n do
  add[i] = tonumber(ARGV[i + 1])
  if not add[i] then error({err = 'ERR history: bad number'}) end
end
local now = now_ms()
local function bump(key, step, slots, ttl)
  local at = step and math.floor(now / step) or 0
  local slot = step and int(at % slots) or 'total'
  local v = typed('hash', 'HGET', key, slot)
  local cur = {}
  if v then for w in string.gmatch(v, '%d+') do cur[#cur + 1] = tonumber(w) end end
  if #cur ~= n + 1 or cur[1] < at then
    cur = {at}
    for i = 1, n do cur[i + 1] = 0 end
  end
  local out = {int(cur[1])}
  for i = 1, n do out[i + 1] = int(cur[i + 1] + add[i]) end
  redis.call('HSET', key, slot, table.concat(out, ' '))
  redis.call('PEXPIRE', key, ttl)
  return at
end
local m = bump(histm, 60000, 1440, tonumber(ARGV[n + 2]))
bump(histh, 3600000, 720, tonumber(ARGV[n + 3]))
bump(histh, nil, nil, tonumber(ARGV[n + 3])) -- the totals (Prometheus' counters)
return m
