-- stats: the queue's counters and depths in one atomic read.
-- KEYS: 1 stats, 2 ready, 3 prio, 4 delayed, 5 active, 6 dead, 7 meta,
--       8 cancelled
-- Returns { enqueued, completed, failed, retried, dead, reclaimed,
--           replayed, ready, delayed, active, dead_depth, cancelled,
--           paused (0/1), cancelled_depth, concurrency limit, rate limit
--           starts, its window ms, exists } (limits 0: none; exists 1
--           when any of these keys is there: a queue never written to has
--           none).
local stats, ready, prio, delayed, active, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
expect_types({stats, 'hash', ready, 'list', prio, 'zset', delayed, 'zset', active, 'zset', dead, 'zset',
              KEYS[7], 'hash', KEYS[8], 'zset'})
local c = int_fields(stats, 'seq', 'retained', 'failed', 'retried', 'dead', 'reclaimed', 'replayed',
                    'skipped', 'swept', 'cancelled')
local out = {}
for i = 1, 7 do out[i] = c[i] or 0 end
out[12] = c[10] or 0
local m = redis.call('HMGET', KEYS[7], 'paused', 'concurrency', 'rate')
out[13] = m[1] and 1 or 0
out[14] = redis.call('ZCARD', KEYS[8])
out[15] = int_fields(KEYS[7], 'concurrency')[1] or 0
out[16], out[17] = limits_rate(m[3])
out[16], out[17] = out[16] or 0, out[17] or 0
-- derived counters (see stats in lib.lua)
out[1] = out[1] - (c[8] or 0) -- enqueued = seq - skipped
out[2] = out[2] + (c[9] or 0) -- completed = retained + swept
out[8] = redis.call('LLEN', ready) + redis.call('ZCARD', prio)
out[9] = redis.call('ZCARD', delayed)
out[10] = redis.call('ZCARD', active) - (redis.call('ZSCORE', active, ACTIVE_PIN) and 1 or 0)
out[11] = redis.call('ZCARD', dead)
out[18] = redis.call('EXISTS', stats, ready, prio, delayed, active, dead, KEYS[7], KEYS[8]) > 0 and 1 or 0
return out
