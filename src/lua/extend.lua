-- extend: push back the lease deadline of running jobs still held with
-- these tokens.
-- KEYS: 1 active
-- ARGV: 1 job key prefix, 2 lease ms, then per job: id, token
-- Returns one code per job: 1 extended, 0 lease lost.
local active = KEYS[1]
local prefix, lease = ARGV[1], tonumber(ARGV[2])
expect_types({active, 'zset'})
local deadline = int(now_ms() + lease)
local out = {}
for i = 3, #ARGV, 2 do
  local id, tok = ARGV[i], ARGV[i + 1]
  local v = redis.call('HMGET', prefix .. id, 's', 't')
  if v[1] == 'active' and v[2] == tok then
    redis.call('ZADD', active, 'XX', deadline, id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
