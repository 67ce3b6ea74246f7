-- complete: finish a batch of claimed jobs with their results. Each job is
-- checked against its fencing token; a stale token changes nothing.
-- KEYS: 1 active, 2 completed, 3 stats
-- ARGV: 1 job key prefix, 2 retention ms (-1 keeps forever), 3 completed
--       history cap (<= 0: none), then per job: id, token, result.
-- Returns one code per job: 1 done (or already done with this token),
-- 0 lease lost.
local active, completed, stats = KEYS[1], KEYS[2], KEYS[3]
local prefix, retention, cap = ARGV[1], ARGV[2], tonumber(ARGV[3])
local keep = tonumber(retention) >= 0
expect_types({active, 'zset', completed, 'zset', stats, 'hash'})
local now = int(now_ms()) -- formatted once: number->string costs per call
local out, gone, hist = {}, {}, {}
local emit = monitor(prefix)

for i = 4, #ARGV, 3 do
  local id, tok, res = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local k = prefix .. id
  local v = redis.call('HMGET', k, 's', 't', 'n')
  if v[1] == 'active' and v[2] == tok then
    redis.call('HSET', k, 's', 'completed', 'r', res)
    if keep then redis.call('PEXPIRE', k, retention) end
    gone[#gone + 1] = id
    if cap > 0 then hist[#hist + 1] = now; hist[#hist + 1] = id end
    notify(v[3], k, 'completed', res)
    emit('completed', id)
    out[#out + 1] = 1
  elseif v[1] == 'completed' and v[2] == tok then
    out[#out + 1] = 1 -- a retried completion whose first reply was lost
  else
    out[#out + 1] = 0
  end
end

if #gone > 0 then
  redis.call('ZREM', active, unpack(gone))
  redis.call('HINCRBY', stats, 'completed', #gone)
end
if #hist > 0 then
  redis.call('ZADD', completed, unpack(hist))
  local extra = redis.call('ZCARD', completed) - cap
  if extra > 0 then redis.call('ZREMRANGEBYRANK', completed, 0, extra - 1) end
end
return out
