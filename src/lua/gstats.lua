-- gstats: the groups by size (their jobs ready, delayed or active, most
-- first: the index G..'all'), each with its depth (ready jobs), active
-- count and settings (README "Groups"; groups_lib.lua).
-- KEYS (src/keys.def; bound to these locals): groups
-- ARGV: 1 offset, 2 count (1..1000), 3 one group's name ('' = the list)
-- Returns { total groups listed in the depth index, then 6 per group:
-- name, depth, active, concurrency (-1 none), weight, paused (0/1) }.
local offset, count, one = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
if not offset or not count or offset < 0 or count < 1 or count > 1000 then
  return redis.error_reply('ERR rjq gstats: bad range')
end
local all, conf = groups .. 'all', groups .. 'conf'
local names
if one ~= '' then names = {one} else names = redis.call('ZREVRANGE', all, offset, offset + count - 1) end
local out = {redis.call('ZCARD', all)}
local c = {}
for _, g in ipairs(names) do
  local limit, weight, paused = GROUPS.conf(groups, g, c)
  out[#out + 1] = g
  out[#out + 1] = redis.call('LLEN', groups .. 'r:' .. g) + redis.call('ZCARD', groups .. 'p:' .. g)
  out[#out + 1] = redis.call('SCARD', groups .. 'a:' .. g)
  out[#out + 1] = limit or -1
  out[#out + 1] = weight
  out[#out + 1] = paused and 1 or 0
end
return out
