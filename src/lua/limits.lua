-- limits: set or clear a queue's limits, stored in its meta hash:
-- concurrency (at most this many of its jobs active at once, across all
-- workers) and rate ("<starts> <window ms>": at most that many starts in
-- any window of that length, server time). claim.lua enforces them. A
-- limited queue has no push delivery (a push would bypass them): the idle
-- registrations are dropped, and the doorbell rung so idle workers claim
-- under the new limits (also when limits are lifted: push delivery
-- resumes with their claims).
-- The waiters for slots under the concurrency limit (claim.lua) start
-- afresh.
-- KEYS (src/keys.def; bound to these locals): meta, idle, starts, waiters
-- A shard of a sharded queue is written with an epoch (ARGV 5: its
-- whole-queue change's, or the figures' a re-split step read;
-- wholelimits.lua): refused when the shard holds a newer one (meta's
-- limits_epoch), so a step that read figures a change has since replaced
-- writes nothing after that change reached the shard.
-- ARGV: 1 wake channel, 2 concurrency (0: none), 3 rate starts (0: none),
--       4 rate window ms, 5 epoch (optional: none, no check)
-- Returns 1, or 0 when refused for its epoch.
local wake, conc, rmax, rwin = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
expect_types({meta, 'hash', idle, 'hash', starts, 'zset'})
local epoch = tonumber(ARGV[5])
if epoch then
  if tonumber(redis.call('HGET', meta, 'limits_epoch') or '0') > epoch then return 0 end
  redis.call('HSET', meta, 'limits_epoch', int(epoch))
end
if conc > 0 then redis.call('HSET', meta, 'concurrency', int(conc))
else redis.call('HDEL', meta, 'concurrency') end
if rmax > 0 then redis.call('HSET', meta, 'rate', int(rmax) .. ' ' .. int(rwin))
else
  redis.call('HDEL', meta, 'rate')
  redis.call('DEL', starts)
end
reset_idle(idle, meta)
redis.call('DEL', waiters)
redis.call(PUB or pub_mode(), wake, '1')
return 1
