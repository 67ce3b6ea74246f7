-- claim: promote due delayed jobs, then move up to `want` ready jobs to
-- active under the call's fencing token, each with a lease. A claim that
-- comes back short registers the slots it could not fill for push
-- delivery (offer_slots in lib.lua).
-- KEYS: 1 ready, 2 prio, 3 delayed, 4 active, 5 stats, 6 idle,
--       7..13 the job columns, 14 monitored
-- ARGV: 1 job name prefix, 2 want (<= 1000: unpack() below holds 2*want
--       values, and Lua's limit is ~8000), 3 lease ms, 4 token (new for
--       every call), 5 wake channel, 6 the worker's idle field,
--       7 its registration epoch, 8 reset (1: replace the registration)
-- Returns { next, registered, token, deadline, id, payload, attempt,
-- max_attempts, ... } where next is -1, or (when fewer than `want` jobs
-- were claimed) the ms until the next delayed job is due, registered the
-- slots registered, token the fencing token of every job this call claimed
-- (ARGV 4) and deadline their lease's end in server time (ms; the worker
-- learns the server's clock from it, and starts no job past it).
-- A claim that filled `want` and left work behind rings the doorbell, so
-- idle workers elsewhere join in (each full claim wakes the next: no herd,
-- no stranded backlog).
local ready, prio, delayed, active, stats, idle = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix, want, lease, tok, wake = ARGV[1], math.min(tonumber(ARGV[2]), 1000), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local field, epoch, reset = ARGV[6], ARGV[7], ARGV[8] == '1'
local J = columns(KEYS, 7, prefix)
expect_types({ready, 'list', prio, 'zset', active, 'zset', idle, 'hash', J.s, 'hash', J.o, 'hash'})
local now = now_ms()

-- Due delayed jobs (and retries) become ready first. (Reading them checks
-- the delayed set's type: nothing is written yet.)
local due = typed('zset', 'ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 1000)
if #due > 0 then
  expect_types({stats, 'hash'}) -- a due priority job takes a sequence number
  redis.call('ZREM', delayed, unpack(due))
  local o, s = redis.call('HMGET', J.o, unpack(due)), redis.call('HMGET', J.s, unpack(due))
  local st, plain = {}, {}
  for i, id in ipairs(due) do
    local _, a = state_of(s[i])
    st[#st + 1] = id; st[#st + 1] = state_value('ready', num(a))
    local p = parse_options(o[i])
    if p == 0 then plain[#plain + 1] = id
    else redis.call('ZADD', prio, prio_score(p, next_seq(stats, prio)), id) end
  end
  redis.call('HSET', J.s, unpack(st))
  if #plain > 0 then rpush_all(ready, plain) end
end

local ids = take_ready(ready, prio, want)
local out = {-1, 0, tok, now + lease} -- a number: an integer reply
local got = 0
if #ids > 0 then
  local d, o, s = load_jobs(J, ids)
  got = start_jobs(J, active, ids, d, o, s, int(now + lease), tok, out, monitor(KEYS[14], prefix))
end
if #ids == want and (redis.call('LLEN', ready) > 0 or redis.call('ZCARD', prio) > 0) then
  redis.call('PUBLISH', wake, '1')
end
if got < want then
  out[2] = offer_slots(idle, field, epoch, lease, want - got, reset)
  local nx = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  if nx[2] then out[1] = math.max(0, tonumber(nx[2]) - now) end
elseif reset then
  offer_slots(idle, field, epoch, lease, 0, true)
end
return out
