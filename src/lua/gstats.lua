-- gstats: the groups by depth (ready jobs, most first), each with its
-- active count and settings (README "Groups"; groups_lib.lua). The groups
-- with ready jobs come from the depth index G..'depth' (kept by the
-- writers: GROUPS.deepen, GROUPS.taken), a page of it read, not every
-- group: O(K log n) for K rows. The groups with running jobs only (none
-- ready) follow, by name: found among the groups listed in G..'all' (at
-- most LOOK of them) that the index misses (one ZMSCORE per 1000, then
-- one SCARD each of those), which also makes the total. Groups with
-- nothing ready or active are not shown. It only reads (a monitor user
-- runs it): the writers that empty a group drop it from G..'all'
-- (GROUPS.tidy) and from the index.
-- KEYS (src/keys.def; bound to these locals): groups
-- ARGV: 1 offset, 2 count (1..1000), 3 one group's name ('' = the list)
-- Returns { groups with jobs (of those looked at), then 9 per group:
-- name, depth, active, concurrency (-1 none), weight, paused (0/1), rate
-- (starts; 0 none), its window (ms; 0 none), max_waiting (0 none) }.
local LOOK = 10000
local offset, count, one = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
if not offset or not count or offset < 0 or count < 1 or count > 1000 then
  return redis.error_reply('ERR rjq gstats: bad range')
end
local all = groups .. 'all'
local rows, total = {}, 0
if one ~= '' then
  local depth = redis.call('LLEN', groups .. 'r:' .. one) + redis.call('ZCARD', groups .. 'p:' .. one)
  rows[1], total = {one, depth, redis.call('SCARD', groups .. 'a:' .. one)}, 1
else
  local idx = groups .. 'depth'
  local nd = redis.call('ZCARD', idx)
  -- the groups listed in G..'all' that the index misses (by name: score
  -- 0): those with running jobs only, and any with ready ids it does not
  -- hold yet (GROUPS.taken writes them at their next claim)
  local busy, extra, names = {}, {}, redis.call('ZRANGE', all, 0, LOOK - 1)
  for at = 1, #names, 1000 do
    local chunk = {unpack(names, at, math.min(at + 999, #names))}
    local v = redis.call('ZMSCORE', idx, unpack(chunk))
    for i, g in ipairs(chunk) do
      if not v[i] then
        local depth = redis.call('LLEN', groups .. 'r:' .. g) + redis.call('ZCARD', groups .. 'p:' .. g)
        local a = redis.call('SCARD', groups .. 'a:' .. g)
        if depth > 0 then extra[#extra + 1] = {g, depth, a}
        elseif a > 0 then busy[#busy + 1] = {g, 0, a} end
      end
    end
  end
  total = nd + #extra + #busy
  -- the page: from the index (read from the top when rows it misses are
  -- merged in), then the groups with running jobs only
  local from = #extra > 0 and 0 or offset
  if from < nd then
    local page = redis.call('ZRANGE', idx, from, offset + count - 1, 'WITHSCORES')
    for i = 1, #page, 2 do
      local g = page[i]
      rows[#rows + 1] = {g, math.max(-tonumber(page[i + 1]), 0), redis.call('SCARD', groups .. 'a:' .. g)}
    end
  end
  if #extra > 0 then
    for _, r in ipairs(extra) do rows[#rows + 1] = r end
    table.sort(rows, function(a, b)
      if a[2] ~= b[2] then return a[2] > b[2] end
      return a[1] < b[1]
    end)
    local keep = {}
    for i = offset + 1, math.min(offset + count, #rows) do keep[#keep + 1] = rows[i] end
    rows = keep
  end
  -- (then the groups with running jobs only, after the nd + #extra rows
  -- with ready jobs)
  for i = math.max(offset - nd - #extra, 0) + 1, #busy do
    if #rows >= count then break end
    rows[#rows + 1] = busy[i]
  end
end
local out = {total}
local c = {}
for i = 1, #rows do
  local g = rows[i][1]
  local limit, weight, paused, rate, win, bound = GROUPS.conf(groups, g, c)
  out[#out + 1] = g
  out[#out + 1] = rows[i][2]
  out[#out + 1] = rows[i][3]
  out[#out + 1] = limit or -1
  out[#out + 1] = weight
  out[#out + 1] = paused and 1 or 0
  out[#out + 1] = rate or 0
  out[#out + 1] = rate and win or 0
  out[#out + 1] = bound or 0
end
return out
