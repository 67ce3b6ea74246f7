-- gone: a swept client's jobs are all back (orphans.lua): forget it, unless
-- its entry changed since the sweep took it on (it came back, or another
-- sweeper took over).
-- KEYS (src/keys.def; bound to these locals): live, queues, sweeps, info
-- ARGV: 1 client id, 2 the sweep's lease end that beat.lua returned
-- Returns 1 when it was forgotten, else 0.
local who = ARGV[1]
if redis.call('HMGET', sweeps, who)[1] == ARGV[2] then redis.call('HDEL', sweeps, who) end
local score = redis.call('ZSCORE', live, who)
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', live, who)
redis.call('HDEL', queues, who)
redis.call('HDEL', info, who)
return 1
