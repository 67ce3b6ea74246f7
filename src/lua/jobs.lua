-- jobs: a page of the ids of a queue's jobs in one state, in the order the
-- queue serves or keeps them (for operators: rjq jobs, a dashboard).
--   ready      claim order: positive priorities highest first, then
--              priority 0 (FIFO), then negative priorities; then the
--              ready jobs of its groups (README "Groups"), group by group
--              in the order of their names, each group's in its claim
--              order (a cancelled job's id, left in its group until a
--              claim drops it, is left out: the page may be short)
--   delayed    by due time; then its groups' delayed jobs, by due time
--   active     by lease end
--   dead, cancelled   oldest first
--   completed  oldest first (the retention index: entries of ids)
--   waiting    (for dependencies, deps_add.lua) oldest first
-- KEYS (src/keys.def; bound to these locals): ready, prio, delayed, active,
--       dead, cancelled, completed, waiting, groups
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
  -- one segment of len ids in the listing's order: fetch(from, n) appends
  -- the page's part of it (the queue's segments and each group's)
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
  local function append(into, ids) for _, id in ipairs(ids) do into[#into + 1] = id end end
  segment(plain, function(from, n) append(out, redis.call('LRANGE', ready, int(from), int(from + n - 1))) end)
  segment(low, function(from, n) zpage(prio, high + from, n) end)
  -- then the groups' (groups_lib.lua: a group with ready jobs is listed
  -- in G..'all', score 0: by name), each in claim order as above; only
  -- the groups up to the page's end are looked at
  local skip = pos
  local names = left > 0 and redis.call('ZRANGE', groups .. 'all', 0, -1) or {}
  for _, g in ipairs(names) do
    if left <= 0 then break end
    local r, p = groups .. 'r:' .. g, groups .. 'p:' .. g
    local gh = redis.call('ZCOUNT', p, '-inf', '(0')
    local gl = redis.call('ZCARD', p) - gh
    local gn = redis.call('LLEN', r)
    local ids = {}
    pos = skip
    segment(gh, function(from, n) append(ids, redis.call('ZRANGE', p, int(from), int(from + n - 1))) end)
    segment(gn, function(from, n) append(ids, redis.call('LRANGE', r, int(from), int(from + n - 1))) end)
    segment(gl, function(from, n) append(ids, redis.call('ZRANGE', p, int(gh + from), int(gh + from + n - 1))) end)
    skip = pos
    if #ids > 0 then
      -- (a cancelled job's id stays in its group until a claim drops it:
      -- it has left the groups' job hash)
      local of = redis.call('HMGET', groups .. 'job', unpack(ids))
      for i, id in ipairs(ids) do if of[i] == g then out[#out + 1] = id end end
    end
  end
elseif state == 'delayed' then
  local own = typed('zset', 'ZCARD', delayed)
  zpage(delayed, offset, limit)
  -- then the groups' delayed jobs (their own delay or a retry's backoff)
  local from = math.max(offset - own, 0)
  local left = limit - #out
  if left > 0 then zpage(groups .. 'delayed', from, left) end
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
