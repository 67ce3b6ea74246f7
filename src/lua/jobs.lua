-- jobs: a page of the ids of a queue's jobs in one state, in the order the
-- queue serves or keeps them (for operators: rjq jobs, a dashboard).
--   ready      claim order: positive priorities highest first, then
--              priority 0 (FIFO), then negative priorities
--   delayed    by due time
--   active     by lease end
--   dead, cancelled   oldest first
--   completed  oldest first (the retention index: entries of ids)
--   waiting    (for dependencies, deps_add.lua) oldest first
-- KEYS (src/keys.def; bound to these locals): ready, prio, delayed, active,
--       dead, cancelled, completed, waiting
-- ARGV: 1 state (one of the above), 2 offset, 3 limit (<= 1000)
-- Returns the ids; an unknown state is an error. Reads only.
local state, offset, limit = ARGV[1], tonumber(ARGV[2]), math.min(tonumber(ARGV[3]), 1000)
local out = {}

-- Append ids [from, from + count) of a sorted set (by rank).
local function zpage(key, from, count)
  if count <= 0 then return end
  for _, id in ipairs(typed('zset', 'ZRANGE', key, int(from), int(from + count - 1))) do
    if id ~= ACTIVE_PIN then out[#out + 1] = id end
  end
end

if state == 'ready' then
  -- three segments in claim order (see take_ready in lib.lua): the prio
  -- set's positive priorities (scores below 0), the ready list, the rest
  -- of the prio set
  local high = typed('zset', 'ZCOUNT', prio, '-inf', '(0')
  local plain = typed('list', 'LLEN', ready)
  local low = redis.call('ZCARD', prio) - high
  local pos, left = offset, limit
  local function segment(len, fetch)
    if left > 0 and pos < len then
      local n = math.min(len - pos, left)
      fetch(pos, n)
      left = left - n
      pos = 0
    else
      pos = pos - len
    end
  end
  segment(high, function(from, n) zpage(prio, from, n) end)
  segment(plain, function(from, n)
    for _, id in ipairs(redis.call('LRANGE', ready, int(from), int(from + n - 1))) do
      out[#out + 1] = id
    end
  end)
  segment(low, function(from, n) zpage(prio, high + from, n) end)
elseif state == 'delayed' then
  zpage(delayed, offset, limit)
elseif state == 'active' then
  zpage(active, offset, limit) -- (its pin is last: never before a job)
elseif state == 'dead' then
  zpage(dead, offset, limit)
elseif state == 'cancelled' then
  zpage(cancelled, offset, limit)
elseif state == 'waiting' then
  zpage(waiting, offset, limit)
elseif state == 'completed' then
  -- entries "<time ms> <id> <id> ...", oldest first: skip offset ids
  local skip, at, total = offset, 0, typed('list', 'LLEN', completed)
  while #out < limit and at < total do
    for _, e in ipairs(redis.call('LRANGE', completed, at, at + 99)) do
      for id in string.gmatch(e, ' (%S+)') do
        if skip > 0 then skip = skip - 1
        elseif #out < limit then out[#out + 1] = id end
      end
    end
    at = at + 100
  end
else
  return redis.error_reply('ERR unknown job state ' .. state)
end
return out
