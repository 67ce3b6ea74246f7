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
--   "g<group> <z or l cursor>"  a ready job of a job group (README
--                    "Groups"): listed after the queue's own, as jobs.lua
--                    lists them, group by group in the order of their
--                    names (G..'all', score 0: ZRANGEBYLEX), each group's
--                    in its claim order; the cursor within its group as
--                    above (a group no longer listed: the next one)
--   "d<score> <id>"  in the groups' delayed set, after the queue's delayed
-- KEYS (src/keys.def; bound to these locals): ready, prio, delayed, active,
--       dead, cancelled, completed, waiting, groups
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
local cgroup -- a group job's cursor: its group (kind, score, cid: within it)
if cursor ~= '' then
  local head, id = string.match(cursor, '^(%S+) (.+)$')
  if not head then return redis.error_reply('ERR bad cursor') end
  kind, cid = string.sub(head, 1, 1), id
  if kind == 'g' then
    cgroup = string.sub(head, 2)
    head, cid = string.match(id, '^(%S+) (.+)$')
    if not head or #cgroup == 0 then return redis.error_reply('ERR bad cursor') end
    kind = string.sub(head, 1, 1)
    if kind ~= 'z' and kind ~= 'l' then return redis.error_reply('ERR bad cursor') end
  end
  if kind == 'z' or kind == 'd' then
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
-- below `below` (nil: no bound), up to the page's limit. (pre: the
-- cursor's kind, 'z' unless given; keep: nil, or a filter of the ids read,
-- which are then cursor places even when left out)
local function zlist(key, from, below, pre, keep)
  pre = pre or 'z'
  while #out < limit do
    local want = limit - #out
    local r = typed('zset', 'ZRANGE', key, int(from), int(from + want - 1), 'WITHSCORES')
    local ids, stop = {}, false
    for i = 1, #r, 2 do
      if below and tonumber(r[i + 1]) >= below then stop = true; break end
      if r[i] ~= ACTIVE_PIN then
        ids[#ids + 1] = r[i]
        next = pre .. r[i + 1] .. ' ' .. r[i]
      end
    end
    for _, id in ipairs(keep and keep(ids) or ids) do out[#out + 1] = id end
    if stop or #r < 2 * want then return end
    from = from + want
  end
end

local function zpage(key, below)
  zlist(key, kind == 'z' and rank_after(key, score, cid) or 0, below)
end

-- The ready ids of list `ready` and priority set `prio` in claim order
-- (jobs.lua): prio scores below 0, the list, the rest; after the cursor
-- (kind, score, cid: nil for the first). pre: the cursors' start ('' for
-- the queue's own); keep: as zlist's.
local function ready_page(ready, prio, kind, score, cid, pre, keep)
  local in_low = kind == 'z' and tonumber(score) >= 0
  if not kind or (kind == 'z' and not in_low) then
    zlist(prio, kind == 'z' and rank_after(prio, score, cid) or 0, 0, pre .. 'z', keep)
  end
  if not in_low and #out < limit then
    local from = 0
    if kind == 'l' then
      local at = redis.call('LPOS', ready, cid)
      if at then from = at + 1 end
    end
    while #out < limit do
      local want = limit - #out
      local r = typed('list', 'LRANGE', ready, from, from + want - 1)
      for _, id in ipairs(r) do next = pre .. 'l ' .. id end
      for _, id in ipairs(keep and keep(r) or r) do out[#out + 1] = id end
      if #r < want then break end
      from = from + want
    end
  end
  if #out < limit then
    local from = redis.call('ZCOUNT', prio, '-inf', '(0')
    if in_low then from = math.max(from, rank_after(prio, score, cid)) end
    zlist(prio, from, nil, pre .. 'z', keep)
  end
end

if state == 'ready' then
  if not cgroup then ready_page(ready, prio, kind, score, cid, '') end
  -- then the groups' ready jobs, group by group (a cancelled job's id,
  -- left in its group until a claim drops it, is left out: it has left
  -- the groups' job hash)
  local all = groups .. 'all'
  local g, after = nil, '-'
  if cgroup then
    if redis.call('ZSCORE', all, cgroup) then g = cgroup end
    after = '(' .. cgroup
  end
  while #out < limit do
    if not g then
      g = redis.call('ZRANGEBYLEX', all, after, '+', 'LIMIT', 0, 1)[1]
      if not g then break end
      kind, score, cid = nil, nil, nil
    end
    local name = g
    local function keep(ids)
      if #ids == 0 then return ids end
      local of, k = redis.call('HMGET', groups .. 'job', unpack(ids)), {}
      for i, id in ipairs(ids) do if of[i] == name then k[#k + 1] = id end end
      return k
    end
    ready_page(groups .. 'r:' .. g, groups .. 'p:' .. g, kind, score, cid, 'g' .. g .. ' ', keep)
    after, g = '(' .. g, nil
  end
elseif state == 'delayed' then
  -- the queue's own, then the groups' delayed set
  if kind ~= 'd' then zpage(delayed) end
  if #out < limit then
    local gd = groups .. 'delayed'
    zlist(gd, kind == 'd' and rank_after(gd, score, cid) or 0, nil, 'd')
  end
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
