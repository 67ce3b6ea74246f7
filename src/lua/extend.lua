-- extend: push back the lease deadline of running jobs still held with
-- these tokens.
-- KEYS: 1 active, 2.. the job columns
-- ARGV: 1 lease ms, then per job: id, token
-- Returns one code per job: 1 extended, 0 lease lost, 2 cancelled
-- (cancel.lua: the worker missed the notice on its push channel).
local active = KEYS[1]
local lease = tonumber(ARGV[1])
local J = columns(KEYS, 2)
expect_types({active, 'zset'})
local deadline = int(now_ms() + lease)
local ids = {}
for i = 2, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
local s = hmget(J.s, ids)
local out, za = {}, {}
for i, id in ipairs(ids) do
  local state, _, t = state_of(s[i])
  if state == 'active' and t == ARGV[2 * i + 1] then
    za[#za + 1] = deadline; za[#za + 1] = id
    out[i] = 1
  elseif state == 'cancelled' and t == ARGV[2 * i + 1] then
    out[i] = 2
  else
    out[i] = 0
  end
end
if #za > 0 then
  for i = 1, #za, 2 * CHUNK do
    redis.call('ZADD', active, 'XX', unpack(za, i, math.min(i + 2 * CHUNK - 1, #za)))
  end
end
return out
