-- promote: run a delayed job now (an operator's "run now"): it leaves the
-- delayed set and becomes ready, last of its priority class, as a due one
-- does in claim.lua; its attempts, error and times stay. Only a job that
-- waits in the delayed set (delayed, or waiting for a retry) moves; a job
-- of a group waits in the groups' delayed set and becomes ready in its
-- group (GROUPS.ready).
-- KEYS (src/keys.def; bound to these locals): delayed, ready, prio, stats,
--       cols, monitored, events, groups
-- ARGV: 1 wake channel, 2 id
-- Returns 1 promoted, -1 no such job, -2 it is not delayed.
local wake, id = ARGV[1], ARGV[2]
local J = columns(cols)
expect_types({delayed, 'zset', ready, 'list', prio, 'zset', stats, 'hash', J.s, 'hash',
              J.o, 'hash', J.d, 'hash'})
local v = fields(J, id, 'd', 's', 'o')
if not v[1] then return -1 end
local state, attempts, _, tm = state_text(v[2])
if state ~= 'delayed' then return -2 end
-- (a priority job's sequence number: its counters checked before the ZREM)
if not redis.call('ZSCORE', delayed, id) then
  -- a job of a group waits in the groups' delayed set: it becomes ready in
  -- its group (README "Groups", groups_lib.lua)
  local g = GROUPS.hinted(v[3]) and typed('zset', 'ZSCORE', groups .. 'delayed', id) and
            typed('hash', 'HMGET', groups .. 'job', id)[1]
  if not g then return -2 end
  -- (the keys GROUPS.ready writes, checked before the first write)
  expect_types({groups .. 'r:' .. g, 'list', groups .. 'p:' .. g, 'zset', groups .. 'a:' .. g, 'set',
                groups .. 'ring', 'zset', groups .. 'all', 'zset', groups .. 'conf', 'hash',
                groups .. 'rated', 'zset', groups .. 'depth', 'zset', groups .. 'busy', 'zset'})
  int_fields(stats, 'seq', 'skipped', 'gready')
  redis.call('ZREM', groups .. 'delayed', id)
  GROUPS.ready(groups, J, g, id, tonumber(attempts), tm, v[3], stats, {})
  monitor(monitored, events)('promoted', id)
  return 1
end
int_fields(stats, 'seq', 'skipped')
redis.call('ZREM', delayed, id)
redis.call('HSET', J.s, id, state_value('ready', attempts, nil, tm))
push_ready(ready, prio, stats, wake, id, (parse_options(v[3])), false)
monitor(monitored, events)('promoted', id)
return 1
