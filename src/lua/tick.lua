-- tick: a scheduler takes or keeps the queue's scheduler lease (one runs
-- at a time: the lease key holds its token, with an expiry) and reads the
-- schedules due.
-- KEYS (src/keys.def; bound to these locals): schedlease, schednext,
--       schedules
-- ARGV: 1 token, 2 lease ms, 3 most schedules returned
-- Returns { 0, server time ms, ms left of the other holder's lease } when
-- another scheduler holds it, else { 1, server time ms, the earliest next
-- fire time of the schedules not due (-1: none), then per schedule due:
-- name, its next fire time (0: to be computed), its spec }.
local token, lease_ms, most = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
expect_types({schedlease, 'string', schednext, 'zset', schedules, 'hash'})
local now = now_ms()
local held, left = lease_take(schedlease, token, lease_ms)
if not held then return {0, now, left} end
local due = redis.call('ZRANGEBYSCORE', schednext, '-inf', now, 'WITHSCORES', 'LIMIT', 0, most)
local later = redis.call('ZRANGEBYSCORE', schednext, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local out = {1, now, later[2] and tonumber(later[2]) or -1}
for i = 1, #due, 2 do
  out[#out + 1] = due[i]; out[#out + 1] = tonumber(due[i + 1])
  out[#out + 1] = redis.call('HMGET', schedules, due[i])[1] or ''
end
return out
