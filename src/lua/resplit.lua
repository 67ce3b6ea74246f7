-- resplit: a sharded queue's re-splitter takes or keeps the queue's
-- re-split lease (one re-splits at a time: lease_take, as the scheduler's
-- tick) and reads the whole-queue limits stored with the declaration
-- (docs/sharding.md 6b). With lease ms 0 it gives the lease up instead
-- (when it still holds it) and returns {0, server time ms, 0}.
-- KEYS (src/keys.def; bound to these locals): resplitlease, shardlimits
-- ARGV: 1 token, 2 lease ms (0: give it up)
-- Returns { 2, server time ms, 0 } when no limits are stored (the lease
-- not touched: a queue never limited costs its re-splitters one read),
-- { 0, server time ms, ms left of the other holder's lease } when another
-- holds it, else { 1, server time ms, the stored whole-queue limits
-- "1 <concurrency> <rate> <window ms>" }.
local token, lease_ms = ARGV[1], tonumber(ARGV[2])
expect_types({resplitlease, 'string', shardlimits, 'string'})
local now = now_ms()
if lease_ms == 0 then
  if redis.call('GET', resplitlease) == token then redis.call('DEL', resplitlease) end
  return {0, now, 0}
end
local figures = redis.call('GET', shardlimits)
if not figures then return {2, now, 0} end
local held, left = lease_take(resplitlease, token, lease_ms)
if not held then return {0, now, left} end
return {1, now, figures}
