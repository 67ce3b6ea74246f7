-- reclaim: jobs whose lease expired (their worker died or hung) go back to
-- the head of ready, or to dead when their attempts are spent. One sweeper
-- per period: the guard key is taken with SET NX PX. Cost is proportional
-- to the expired jobs, not to the active set.
-- KEYS: 1 active, 2 ready, 3 prio, 4 dead, 5 stats, 6 guard
-- ARGV: 1 job key prefix, 2 wake channel, 3 guard ms (0: no guard),
--       4 max jobs, 5 dead cap
-- Returns the number of jobs reclaimed, or -1 when another sweeper holds
-- the guard.
local active, ready, prio, dead, stats, guard = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix, wake, guard_ms, limit, dead_max = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
expect_types({active, 'zset', ready, 'list', prio, 'zset', dead, 'zset', stats, 'hash'})
if guard_ms > 0 and not redis.call('SET', guard, '1', 'NX', 'PX', guard_ms) then
  return -1
end
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', active, '-inf', now, 'LIMIT', 0, limit)
if #ids == 0 then return 0 end
-- ids whose hash is gone or not active (stale entries) are dropped
redis.call('ZREM', active, unpack(ids))
local emit = monitor(prefix)
local n = 0
for _, id in ipairs(ids) do
  local k = prefix .. id
  local v = redis.call('HMGET', k, 's', 'a', 'm', 'p')
  if v[1] == 'active' then
    n = n + 1
    emit('reclaimed', id)
    if tonumber(v[2] or '0') >= max_attempts(v[3]) then
      bury(dead, stats, prefix, k, id, now, 'lease expired', dead_max, emit)
    else
      redis.call('HSET', k, 's', 'ready', 'e', 'lease expired')
      redis.call('HDEL', k, 't') -- the dead worker's token fences nothing now
      push_ready(ready, prio, stats, wake, id, tonumber(v[4] or '0'), true)
    end
  end
end
if n > 0 then redis.call('HINCRBY', stats, 'reclaimed', n) end
return n
