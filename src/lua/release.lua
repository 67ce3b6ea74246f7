-- release: hand back pushed jobs a worker did not start (it had no room,
-- was stopping, or is gone). Each goes back to the head of its priority
-- class with the attempt the push counted undone. Checked against the
-- fencing token. A stale registration of the worker is dropped too.
-- KEYS (src/keys.def; bound to these locals): active, ready, prio, stats,
--       idle, cols, monitored, events
-- ARGV: 1 job name prefix, 2 wake channel, 3 the worker's idle field ('' for
--       none), then per job: id, token.
-- Returns the number of jobs released.
local prefix, wake, field = ARGV[1], ARGV[2], ARGV[3]
local J = columns(cols, prefix)
expect_types({active, 'zset', ready, 'list', prio, 'zset', stats, 'hash', idle, 'hash', J.s, 'hash'})

if field ~= '' then redis.call('HDEL', idle, field) end

local emit = monitor(monitored, events)
local n = 0
-- in reverse, so that jobs pushed together keep their order at the head
for i = #ARGV - 1, 4, -2 do
  local id, tok = ARGV[i], ARGV[i + 1]
  local v = fields(J, id, 's', 'o')
  local state, attempts, t, tm = state_of(v[1])
  if state == 'active' and t == tok then
    hand_back(J, active, ready, prio, stats, wake, id, attempts, v[2], emit, tm)
    n = n + 1
  end
end
return n
