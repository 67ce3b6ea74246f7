-- gone: a swept client's jobs are all back (orphans.lua): forget it, unless
-- its entry changed since the sweep took it on (it came back, or another
-- sweeper took over).
-- KEYS: 1 liveness set, 2 queues, 3 sweeps, 4 info (beat.lua)
-- ARGV: 1 client id, 2 the sweep's lease end that beat.lua returned
-- Returns 1 when it was forgotten, else 0.
local live, queues, sweeps, who = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
if redis.call('HMGET', sweeps, who)[1] == ARGV[2] then redis.call('HDEL', sweeps, who) end
local score = redis.call('ZSCORE', live, who)
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', live, who)
redis.call('HDEL', queues, who)
redis.call('HDEL', KEYS[4], who)
return 1
