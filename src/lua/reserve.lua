-- reserve: set job numbers aside for a producer that writes the payloads
-- of its next anonymous jobs itself, ahead of the enqueue call that takes
-- them (enqueue.c, "Payloads ahead"): the numbers count as taken (seq) and
-- as skipped until an enqueue uses them, so enqueued (seq - skipped) only
-- counts jobs. The range is recorded in `reserved` ("<lo>-<hi>-<nonce>",
-- scored by when; the producer's random nonce tells it from a range of the
-- same numbers reserved after a reset) for the enqueue to check: a server
-- that lost it (flushed, or restored from before it) may have given the
-- numbers to other jobs.
-- Records older than a day are dropped here (a producer that stopped).
-- KEYS (src/keys.def; bound to these locals): stats, reserved, prio
-- ARGV: 1 how many numbers, 2 nonce (letters and digits)
-- Returns { lo, hi }.
local r = tonumber(ARGV[1])
if not r or r < 1 or r > 1000000 or not string.match(ARGV[2], '^%w+$') then
  return redis.error_reply('ERR rjq reserve: bad arguments')
end
local now = now_ms()
-- the counters it counts, before the first write (a skipped refused after
-- seq counted numbers nobody holds)
int_fields(stats, 'seq', 'skipped')
typed('zset', 'ZREMRANGEBYSCORE', reserved, '-inf', now - 86400000)
expect_types({prio, 'zset'})
local hi = redis.call('HINCRBY', stats, 'seq', r)
redis.call('HINCRBY', stats, 'skipped', r)
local lo = hi - r + 1
-- a rank window that starts inside the range is taken here (see "Order
-- within a priority" in lib.lua)
if rank_window_in(lo, hi) then renumber_prio(prio) end
redis.call('ZADD', reserved, now, int(lo) .. '-' .. int(hi) .. '-' .. ARGV[2])
return {int(lo), int(hi)}
