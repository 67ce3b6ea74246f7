-- schedule: set, remove or list a queue's schedules (repeatable and cron
-- jobs). A schedule is its spec (schedules: name -> "<every ms> <utc
-- offset min> <catchup ms> <missed: skip|once> <job options or -> <cron
-- expression or ->"), its jobs' payload (schedpayload) and its next fire
-- time (schednext, server ms; 0 until a scheduler computes the first, see
-- tick.lua and fire.lua).
-- KEYS (src/keys.def; bound to these locals): schedules, schedpayload,
--       schednext
-- ARGV: 1 'set', 2 name, 3 spec, 4 payload: returns 1 when new or changed
--         (a changed spec has its next fire time computed again), 0 when
--         unchanged;
--       1 'remove', 2 name: returns 1 when it existed, else 0;
--       1 'list': returns { name, spec, next, ... } in name order.
expect_types({schedules, 'hash', schedpayload, 'hash', schednext, 'zset'})
local op = ARGV[1]
if op == 'set' then
  local name, spec = ARGV[2], ARGV[3]
  local old = redis.call('HMGET', schedules, name)[1]
  local same_payload = redis.call('HMGET', schedpayload, name)[1] == ARGV[4]
  if not same_payload then redis.call('HSET', schedpayload, name, ARGV[4]) end
  if old == spec and redis.call('ZSCORE', schednext, name) then return same_payload and 0 or 1 end
  redis.call('HSET', schedules, name, spec)
  redis.call('ZADD', schednext, 0, name)
  return 1
elseif op == 'remove' then
  local name = ARGV[2]
  redis.call('HDEL', schedpayload, name)
  redis.call('ZREM', schednext, name)
  return redis.call('HDEL', schedules, name)
end
local all = redis.call('HGETALL', schedules)
local names, spec_of = {}, {}
for i = 1, #all, 2 do names[#names + 1] = all[i]; spec_of[all[i]] = all[i + 1] end
table.sort(names)
local out = {}
for _, name in ipairs(names) do
  out[#out + 1] = name; out[#out + 1] = spec_of[name]
  out[#out + 1] = tonumber(redis.call('ZSCORE', schednext, name) or '-1')
end
return out
