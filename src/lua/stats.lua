-- stats: the queue's counters and depths in one atomic read.
-- KEYS (src/keys.def; bound to these locals): stats, ready, prio, delayed,
--       active, dead, meta, cancelled, dedup, waiting, groups, batches,
--       schedules, histm, histh
-- Returns { enqueued, completed, failed, retried, dead, reclaimed,
--           replayed, ready, delayed, active, dead_depth, cancelled,
--           paused (0/1), cancelled_depth, concurrency limit, rate limit
--           starts, its window ms, exists, ids reserved by dedup, the
--           earliest time one of them is let go (ms; 0: none), waiting (for
--           dependencies: deps_add.lua) } (limits 0: none; exists 1 when
--           any key of the queue is there: the first eight or waiting,
--           else (asked only then) dedup, batches, schedules, the history
--           or the groups' (all, act, conf): a queue with nothing but
--           batches, group settings or schedules exists, with zeros; a
--           queue never written to has none; the reserved ids: those of jobs whose
--           record went before their dedup time was over, whose time is not
--           over yet).
expect_types({stats, 'hash', ready, 'list', prio, 'zset', delayed, 'zset', active, 'zset', dead, 'zset',
              meta, 'hash', cancelled, 'zset', dedup, 'zset', waiting, 'zset'})
local c = int_fields(stats, 'seq', 'retained', 'failed', 'retried', 'dead', 'reclaimed', 'replayed',
                    'skipped', 'swept', 'cancelled', 'gready')
local out = {}
for i = 1, 7 do out[i] = c[i] or 0 end
out[12] = c[10] or 0
local m = redis.call('HMGET', meta, 'paused', 'concurrency', 'rate')
out[13] = m[1] and 1 or 0
out[14] = redis.call('ZCARD', cancelled)
out[15] = int_fields(meta, 'concurrency')[1] or 0
out[16], out[17] = limits_rate(m[3])
out[16], out[17] = out[16] or 0, out[17] or 0
-- derived counters (see stats in lib.lua)
out[1] = out[1] - (c[8] or 0) -- enqueued = seq - skipped
out[2] = out[2] + (c[9] or 0) -- completed = retained + swept
-- (ready: the queue's own and its groups' ready jobs, counted by the group
-- scripts: 'gready', groups_lib.lua)
out[8] = redis.call('LLEN', ready) + redis.call('ZCARD', prio) + math.max(c[11] or 0, 0)
-- (delayed: the queue's own and its groups' delayed jobs, groups_lib.lua)
out[9] = redis.call('ZCARD', delayed) + redis.call('ZCARD', groups .. 'delayed')
out[10] = redis.call('ZCARD', active) - (redis.call('ZSCORE', active, ACTIVE_PIN) and 1 or 0)
out[11] = redis.call('ZCARD', dead)
out[18] = (redis.call('EXISTS', stats, ready, prio, delayed, active, dead, meta, cancelled, waiting) > 0
           or redis.call('EXISTS', dedup, batches, schedules, histm, histh, groups .. 'all',
                         groups .. 'act', groups .. 'conf') > 0) and 1 or 0
local now = now_ms()
out[19] = redis.call('ZCOUNT', dedup, '(' .. int(now), '+inf')
local next_ = out[19] > 0 and redis.call('ZRANGEBYSCORE', dedup, '(' .. int(now), '+inf', 'WITHSCORES',
                                         'LIMIT', 0, 1) or {}
out[20] = next_[2] and tonumber(next_[2]) or 0
out[21] = redis.call('ZCARD', waiting)
return out
