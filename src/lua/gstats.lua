-- gstats: the groups by depth (ready jobs, most first), each with its
-- active count and settings (README "Groups"; groups_lib.lua). The list
-- is made here, from the groups listed in G..'all' (at most LOOK of them:
-- a listing costs three reads per group); groups with nothing ready or
-- active are not shown. It only reads (a monitor user runs it): the
-- writers that empty a group drop it from G..'all' (GROUPS.tidy).
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
local names
if one ~= '' then names = {one} else names = redis.call('ZRANGE', all, 0, LOOK - 1) end
local rows = {}
for _, g in ipairs(names) do
  local depth = redis.call('LLEN', groups .. 'r:' .. g) + redis.call('ZCARD', groups .. 'p:' .. g)
  local active = tonumber(redis.call('HMGET', groups .. 'act', g)[1]) or 0
  if depth > 0 or active > 0 or one ~= '' then rows[#rows + 1] = {g, depth, active} end
end
table.sort(rows, function(a, b)
  if a[2] ~= b[2] then return a[2] > b[2] end
  return a[1] < b[1]
end)
local out = {#rows}
local c = {}
for i = offset + 1, math.min(offset + count, #rows) do
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
