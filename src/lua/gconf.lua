-- gconf: set a group's settings, or the defaults of every group
-- (README "Groups"; groups_lib.lua, the conf hash).
-- KEYS (src/keys.def; bound to these locals): cols, groups, active
-- ARGV: 1 group ('*': the defaults of every group), 2 what: 'limits' then
--       3 concurrency ('-': the defaults'/none; 0 none), 4 weight ('-':
--       the defaults'/1), 5 rate ("<starts>/<window ms>", '0' none,
--       '-' the defaults'/none; absent: unchanged), 6 bound on its ready
--       jobs (as 3; absent: unchanged); or 'pause' / 'resume' (a group
--       only)
-- The groups affected are offered again (groups_lib.lua GROUPS.offer):
-- one that can start work now enters the ring (the doorbell rings when
-- it was empty), one paused or at its new limit leaves it; one waiting
-- for its rate window is offered too (the next claim looks at its rate).
-- The slot sets and active counts of the groups affected are made again
-- from the queue's running jobs (GROUPS.resync: only a group with a limit
-- has a slot set).
-- Returns the number of groups offered again.
local g, what = ARGV[1], ARGV[2]
local J = columns(cols)
if g ~= '*' and (#g == 0 or #g > 64 or not string.match(g, GROUPS.NAME)) then
  return redis.error_reply('ERR rjq gconf: bad group name')
end
local conf = groups .. 'conf'
expect_types({conf, 'hash', groups .. 'ring', 'zset', groups .. 'all', 'zset', groups .. 'rated', 'zset',
              active, 'zset'})
local function n_or_dash(v)
  if v == '-' or string.match(v or '', '^%d+$') then return v end
  return nil
end
local cur = redis.call('HMGET', conf, g)[1]
local l, w, p, r, b = string.match(cur or '', '^(%S+) (%S+) ?(%d?) ?(%S*) ?(%S*)$')
l, w, p = l or '-', w or '-', (p and p ~= '') and p or '0'
r, b = (r and r ~= '') and r or '-', (b and b ~= '') and b or '-'
if what == 'limits' then
  l, w = n_or_dash(ARGV[3]), n_or_dash(ARGV[4])
  if ARGV[5] then
    r = ARGV[5]
    local rn, rw = string.match(r, '^(%d+)/(%d+)$')
    if r ~= '-' and r ~= '0' and not (rn and tonumber(rn) > 0 and tonumber(rw) > 0) then r = nil end
  end
  if ARGV[6] then b = n_or_dash(ARGV[6]) end
  if not l or not w or not r or not b then return redis.error_reply('ERR rjq gconf: bad limits') end
elseif (what == 'pause' or what == 'resume') and g ~= '*' then
  p = what == 'pause' and '1' or '0'
else
  return redis.error_reply('ERR rjq gconf: bad request')
end
local rest = (r ~= '-' or b ~= '-') and ' ' .. r .. ' ' .. b or ''
if g == '*' then
  if l == '-' and w == '-' and rest == '' then redis.call('HDEL', conf, g)
  elseif rest == '' then redis.call('HSET', conf, g, l .. ' ' .. w)
  else redis.call('HSET', conf, g, l .. ' ' .. w .. ' 0' .. rest) end
elseif l == '-' and w == '-' and p == '0' and rest == '' then
  redis.call('HDEL', conf, g)
else
  redis.call('HSET', conf, g, l .. ' ' .. w .. ' ' .. p .. rest)
end
-- (a group waiting for its rate window, whose rate may have changed:
-- offered now, and the next claim looks at its rate again)
if g == '*' then redis.call('DEL', groups .. 'rated') else redis.call('ZREM', groups .. 'rated', g) end
local c, n = {}, 0
local gs = g == '*' and redis.call('ZRANGE', groups .. 'all', 0, -1) or {g}
GROUPS.resync(groups, active, gs, c)
for _, name in ipairs(gs) do
  GROUPS.offer(groups, J, name, c); n = n + 1
end
return n
