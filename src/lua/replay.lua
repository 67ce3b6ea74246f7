-- replay: dead jobs go back to ready with their attempts reset.
-- KEYS (src/keys.def; bound to these locals): dead, ready, prio, stats, cols
-- ARGV: 1 wake channel, 2 id ('' = the oldest ones), 3 max jobs when no id
--       is given
-- Returns the number replayed; with an id: -1 no such job, -2 not dead.
local wake, id, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local J = columns(cols)
expect_types({dead, 'zset', ready, 'list', prio, 'zset', stats, 'hash',
              J.s, 'hash'})
-- the counters it counts (a priority job's sequence number, replayed),
-- before the first write: a refused HINCRBY after the ZREM lost the job
int_fields(stats, 'seq', 'skipped', 'replayed')

local function replay_one(jid)
  if redis.call('HEXISTS', J.d, jid) == 0 then return -1 end
  local v = fields(J, jid, 's', 'o')
  if state_of(v[1]) ~= 'dead' then return -2 end
  redis.call('ZREM', dead, jid)
  -- ready, attempts reset; its enqueue time stays (the state column, lib.lua)
  local q = times_split(select(4, state_of(v[1])))
  if q ~= '' then redis.call('HSET', J.s, jid, state_value('ready', '0', nil, q .. ',,'))
  else redis.call('HDEL', J.s, jid) end
  push_ready(ready, prio, stats, wake, jid, (parse_options(v[2])), false)
  return 1
end

local n = 0
if id ~= '' then
  n = replay_one(id)
  if n < 0 then return n end
else
  for _, jid in ipairs(redis.call('ZRANGE', dead, 0, limit - 1)) do
    if replay_one(jid) == 1 then n = n + 1
    else redis.call('ZREM', dead, jid) end -- record gone: drop the stale entry
  end
end
if n > 0 then redis.call('HINCRBY', stats, 'replayed', n) end
return n
