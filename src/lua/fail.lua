-- fail: a claimed job failed. Retry after backoff while attempts remain,
-- else (or when fatal) move it to dead. Checked against the fencing token.
-- KEYS: 1 active, 2 ready, 3 prio, 4 delayed, 5 dead, 6 stats, 7..13 the job columns, 14 monitored
-- ARGV: 1 job name prefix, 2 wake channel, 3 id, 4 token, 5 error text,
--       6 fatal (0/1), 7 retry delay ms (-1: the job's backoff),
--       8 jitter in [0,1), 9 dead cap
-- Returns 0 lease lost, 1 retry scheduled, 2 dead, 3 already failed with
-- this token (a retried call whose first reply was lost), 4 cancelled
-- (cancel.lua).
local active, ready, prio, delayed, dead, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix, wake, id, tok, err = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local fatal, delay, jitter, dead_max = ARGV[6] == '1', tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local J = columns(KEYS, 7, prefix)
expect_types({active, 'zset', ready, 'list', prio, 'zset', delayed, 'zset', dead, 'zset', stats, 'hash',
              J.s, 'hash', J.e, 'hash', J.f, 'hash'})
local v = fields(J, id, 's', 'o', 'f')
local state, attempts, t = state_of(v[1])
if state ~= 'active' or t ~= tok then
  -- failtoken is the token of the claim whose failure was applied last: a
  -- call re-sent after a lost reply is recognised even if the job moved on
  if v[3] == tok then return 3 end
  if state == 'cancelled' and t == tok then return 4 end
  return 0
end

local now = now_ms()
local emit = monitor(KEYS[14], prefix)
redis.call('ZREM', active, id)
redis.call('HSET', J.f, id, tok)
emit('failed', id)
redis.call('HINCRBY', stats, 'failed', 1)
local p, max, backoff = parse_options(v[2])
if fatal or attempts >= max then
  bury(J, dead, stats, id, attempts, now, err, dead_max, emit)
  return 2
end
if delay < 0 then delay = backoff_ms(backoff, attempts, jitter) end
redis.call('HINCRBY', stats, 'retried', 1)
emit('retried', id)
redis.call('HSET', J.e, id, err)
if delay > 0 then
  redis.call('HSET', J.s, id, state_value('delayed', attempts))
  if push_delayed(delayed, id, now + delay) then redis.call('PUBLISH', wake, '1') end
else
  redis.call('HSET', J.s, id, state_value('ready', attempts))
  push_ready(ready, prio, stats, wake, id, p, false)
end
return 1
