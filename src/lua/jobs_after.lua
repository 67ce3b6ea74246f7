-- jobs_after: a page of the ids of a queue's jobs in one state, in the
-- order of jobs.lua, after a cursor instead of an offset, so that jobs
-- leaving the list between two pages (claimed, retried, cancelled) never
-- make the next page skip or repeat one. A cursor names the last job
-- listed by its place, not its rank:
--   "z<score> <id>"  in a sorted set (delayed, active, dead, cancelled, waiting, and
--                    the prio set of ready): the next page starts after
--                    (score, id) in the set's order, whether or not that
--                    job is still there (a binary search in its ties)
--   "l <id>"         in the ready list (FIFO, taken from its head): after
--                    the id; when it has left the list (taken), from the
--                    head: every job ahead of it was taken before it
--   "c <id>"         in the completed index: after the id; when it was
--                    swept, from the oldest kept
-- KEYS (src/keys.def; bound to these locals): ready, prio, delayed, active,
--       dead, cancelled, completed, waiting
-- ARGV: 1 state, 2 cursor ('' = from the first job), 3 limit (<= 1000)
-- Returns { next, ids... }: next is the cursor after the last id listed
-- when the page is full, '' when the list ended. Reads only.
local state, cursor, limit = ARGV[1], ARGV[2], math.min(tonumber(ARGV[3]), 1000)
local out, next = {}, ''

-- Byte order, as a sorted set orders equal scores (Lua's own comparison
-- follows the server's locale).
local function bytes_le(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end

-- The cursor's parts: kind ('z', 'l', 'c' or nil for none), score (text),
-- id.
local kind, score, cid = nil, nil, nil
if cursor ~= '' then
  local head, id = string.match(cursor, '^(%S+) (.+)$')
  if not head then return redis.error_reply('ERR bad cursor') end
  kind, cid = string.sub(head, 1, 1), id
  if kind == 'z' then
    score = string.sub(head, 2)
    if not tonumber(score) then return redis.error_reply('ERR bad cursor') end
  elseif kind ~= 'l' and kind ~= 'c' then
    return redis.error_reply('ERR bad cursor')
  end
end

-- The rank of the first member of sorted set key after (s, id).
local function rank_after(key, s, id)
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. s)
  local hi = lo + redis.call('ZCOUNT', key, s, s)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if bytes_le(redis.call('ZRANGE', key, mid, mid)[1], id) then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- Append members of sorted set key from rank `from` while their score is
-- below `below` (nil: no bound), up to the page's limit.
local function zlist(key, from, below)
  while #out < limit do
    local want = limit - #out
    local r = typed('zset', 'ZRANGE', key, int(from), int(from + want - 1), 'WITHSCORES')
    for i = 1, #r, 2 do
      if below and tonumber(r[i + 1]) >= below then return end
      if r[i] ~= ACTIVE_PIN then
        out[#out + 1] = r[i]
        next = 'z' .. r[i + 1] .. ' ' .. r[i]
      end
    end
    if #r < 2 * want then return end
    from = from + want
  end
end

local function zpage(key, below)
  zlist(key, kind == 'z' and rank_after(key, score, cid) or 0, below)
end

if state == 'ready' then
  -- claim order (jobs.lua): prio scores below 0, the ready list, the rest
  local in_low = kind == 'z' and tonumber(score) >= 0
  if not kind or (kind == 'z' and not in_low) then zpage(prio, 0) end
  if not in_low and #out < limit then
    local from = 0
    if kind == 'l' then
      local at = redis.call('LPOS', ready, cid)
      if at then from = at + 1 end
    end
    while #out < limit do
      local want = limit - #out
      local r = typed('list', 'LRANGE', ready, from, from + want - 1)
      for _, id in ipairs(r) do
        out[#out + 1] = id
        next = 'l ' .. id
      end
      if #r < want then break end
      from = from + want
    end
  end
  if #out < limit then
    local from = redis.call('ZCOUNT', prio, '-inf', '(0')
    if in_low then from = math.max(from, rank_after(prio, score, cid)) end
    zlist(prio, from, nil)
  end
elseif state == 'delayed' then zpage(delayed)
elseif state == 'active' then zpage(active)
elseif state == 'dead' then zpage(dead)
elseif state == 'cancelled' then zpage(cancelled)
elseif state == 'waiting' then zpage(waiting)
elseif state == 'completed' then
  -- entries "<time ms> <id> <id> ...", oldest first, read once. seeking:
  -- passing over the ids up to the cursor's (the page starts after it);
  -- meanwhile head keeps the first ids read: the page when the cursor's id
  -- is no longer indexed (swept, with every older one: from the oldest kept)
  local total, at = typed('list', 'LLEN', completed), 0
  local seeking, head = kind == 'c', {}
  while #out < limit and at < total do
    for _, e in ipairs(redis.call('LRANGE', completed, at, at + 99)) do
      for id in string.gmatch(e, ' (%S+)') do
        if seeking then
          if id == cid then seeking = false
          elseif #head < limit then head[#head + 1] = id end
        elseif #out < limit then
          out[#out + 1] = id
          next = 'c ' .. id
        end
      end
    end
    at = at + 100
  end
  if seeking then
    for _, id in ipairs(head) do
      out[#out + 1] = id
      next = 'c ' .. id
    end
  end
else
  return redis.error_reply('ERR unknown job state ' .. state)
end
if #out < limit then next = '' end
table.insert(out, 1, next)
return out
