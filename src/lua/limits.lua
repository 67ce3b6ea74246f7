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
-- Every number is checked before the first write: one that is not a
-- non-negative integer below 2^53 (exact in Lua; rjq writes none larger),
-- in ARGV or in meta's limits_epoch (written behind rjq's back), refuses
-- the call with an error that names it, nothing written.
local EXACT_MAX = 9007199254740992 -- 2^53
local function count(v, what)
  local n = string.match(v or '', '^%d+$') and tonumber(v)
  if not n or n >= EXACT_MAX then
    error({err = 'ERR rjq limits: ' .. what .. ' is not an integer in [0, 2^53)'})
  end
  return n
end
local wake = ARGV[1]
local conc, rmax, rwin = count(ARGV[2], 'concurrency'), count(ARGV[3], 'rate'), count(ARGV[4], 'rate window')
local epoch = ARGV[5] and count(ARGV[5], 'epoch')
expect_types({meta, 'hash', idle, 'hash', starts, 'zset'})
if epoch then
  local have = int_fields(meta, 'limits_epoch')[1]
  if have and (have < 0 or have >= EXACT_MAX) then
    error({err = 'WRONGTYPE field limits_epoch of ' .. meta .. ' is not an integer in [0, 2^53), '
                 .. 'rjq expects one'})
  end
  if (have or 0) > epoch then return 0 end
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
