-- gconf: set a group's settings, or the defaults of every group
-- (README "Groups"; groups_lib.lua, the conf hash).
-- KEYS (src/keys.def; bound to these locals): cols, groups
-- ARGV: 1 group ('*': the defaults of every group), 2 what: 'limits' then
--       3 concurrency ('-': the defaults'/none; 0 none), 4 weight ('-':
--       the defaults'/1); or 'pause' / 'resume' (a group only)
-- The groups affected are offered again (groups_lib.lua GROUPS.offer):
-- one that can start work now enters the ring (the doorbell rings when
-- it was empty), one paused or at its new limit leaves it.
-- Returns the number of groups offered again.
local g, what = ARGV[1], ARGV[2]
local J = columns(cols)
if g ~= '*' and (#g == 0 or #g > 64 or not string.match(g, GROUPS.NAME)) then
  return redis.error_reply('ERR rjq gconf: bad group name')
end
local conf = groups .. 'conf'
expect_types({conf, 'hash', groups .. 'ring', 'zset', groups .. 'all', 'zset'})
local function n_or_dash(v)
  if v == '-' or string.match(v or '', '^%d+$') then return v end
  return nil
end
local cur = redis.call('HGET', conf, g)
local l, w, p = string.match(cur or '', '^(%S+) (%S+) ?(%d?)$')
l, w, p = l or '-', w or '-', p or '0'
if what == 'limits' then
  l, w = n_or_dash(ARGV[3]), n_or_dash(ARGV[4])
  if not l or not w then return redis.error_reply('ERR rjq gconf: bad limits') end
elseif (what == 'pause' or what == 'resume') and g ~= '*' then
  p = what == 'pause' and '1' or '0'
else
  return redis.error_reply('ERR rjq gconf: bad request')
end
if g == '*' then
  if l == '-' and w == '-' then redis.call('HDEL', conf, g) else redis.call('HSET', conf, g, l .. ' ' .. w) end
elseif l == '-' and w == '-' and p == '0' then
  redis.call('HDEL', conf, g)
else
  redis.call('HSET', conf, g, l .. ' ' .. w .. ' ' .. p)
end
local c, n = {}, 0
if g == '*' then
  for _, name in ipairs(redis.call('ZRANGE', groups .. 'all', 0, -1)) do
    GROUPS.offer(groups, J, name, c); n = n + 1
  end
else
  GROUPS.offer(groups, J, g, c); n = 1
end
return n
