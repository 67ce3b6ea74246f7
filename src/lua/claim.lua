-- claim: promote due delayed jobs, then move up to `want` ready jobs to
-- active with a fresh fencing token and a lease each.
-- KEYS: 1 ready, 2 prio, 3 delayed, 4 active, 5 stats, 6..12 the job columns, 13 monitored
-- ARGV: 1 job name prefix, 2 want (<= 1000: unpack() below holds 2*want
--       values, and Lua's limit is ~8000), 3 lease ms, 4 token base
--       (unique per call), 5 wake channel
-- Returns { next, id, token, payload, attempt, max_attempts, ... } where
-- next is -1, or (when fewer than `want` jobs were claimed) the ms until
-- the next delayed job is due. A claim that filled `want` and left work behind rings the
-- doorbell, so idle workers elsewhere join in (each full claim wakes the
-- next: no herd, no stranded backlog).
local ready, prio, delayed, active, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local prefix, want, lease, tbase, wake = ARGV[1], math.min(tonumber(ARGV[2]), 1000), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local J = columns(6, prefix)
expect_types({ready, 'list', prio, 'zset', delayed, 'zset', active, 'zset',
              J.s, 'hash', J.o, 'hash'})
local now = now_ms()

-- Due delayed jobs (and retries) become ready first.
local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 1000)
if #due > 0 then
  redis.call('ZREM', delayed, unpack(due))
  local o, s = redis.call('HMGET', J.o, unpack(due)), redis.call('HMGET', J.s, unpack(due))
  local st, plain = {}, {}
  for i, id in ipairs(due) do
    local _, a = state_of(s[i])
    st[#st + 1] = id; st[#st + 1] = state_value('ready', a)
    local p = parse_options(o[i])
    if p == 0 then plain[#plain + 1] = id
    else redis.call('ZADD', prio, prio_score(p, redis.call('HINCRBY', stats, 'seq', 1)), id) end
  end
  redis.call('HSET', J.s, unpack(st))
  if #plain > 0 then rpush_all(ready, plain) end
end

-- Strict priority: positive priorities, then priority 0, then negative.
local ids = {}
if redis.call('ZCARD', prio) > 0 then
  ids = redis.call('ZRANGEBYSCORE', prio, '-inf', '(0', 'LIMIT', 0, want)
  if #ids > 0 then redis.call('ZREM', prio, unpack(ids)) end
end
if #ids < want then
  local got = redis.call('LPOP', ready, want - #ids)
  if got then for _, id in ipairs(got) do ids[#ids + 1] = id end end
end
if #ids < want and redis.call('ZCARD', prio) > 0 then
  local low = redis.call('ZPOPMIN', prio, want - #ids)
  for i = 1, #low, 2 do ids[#ids + 1] = low[i] end
end

local out = {-1}
if #ids > 0 then
  local emit = monitor(KEYS[13], prefix)
  local deadline = int(now + lease)
  local d, o, s = hmget(J.d, ids), hmget_sparse(J.o, ids), hmget(J.s, ids)
  local za, st = {'+inf', ACTIVE_PIN}, {}
  for i, id in ipairs(ids) do
    if d[i] then -- a record deleted behind rjq's back is skipped
      local tok = tbase .. '.' .. i
      local _, a = state_of(s[i])
      local n = a + 1
      local _, max = parse_options(o[i])
      za[#za + 1] = deadline; za[#za + 1] = id
      st[#st + 1] = id; st[#st + 1] = 'active ' .. n .. ' ' .. tok
      out[#out + 1] = id
      out[#out + 1] = tok
      out[#out + 1] = d[i]
      out[#out + 1] = n
      out[#out + 1] = max
      emit('active', id)
    end
  end
  if #st > 0 then
    redis.call('ZADD', active, unpack(za))
    redis.call('HSET', J.s, unpack(st))
  end
end
if #ids == want then
  if redis.call('LLEN', ready) > 0 or redis.call('ZCARD', prio) > 0 then
    redis.call('PUBLISH', wake, '1')
  end
else
  local nx = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  if nx[2] then out[1] = math.max(0, tonumber(nx[2]) - now) end
end
return out
