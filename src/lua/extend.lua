-- extend: push back the lease deadline of running jobs still held with
-- these tokens. A job with a timeout is never extended past the end of
-- its run time (deadlines, see start_jobs in lib.lua): once that has come,
-- its lease is left to run out (the reclaim sweep then fails it as timed
-- out) and its holder is told.
-- KEYS: 1 active, 2..8 the job columns, 9 deadlines
-- ARGV: 1 lease ms, then per job: id, token
-- Returns one code per job: 1 extended, 0 lease lost, 2 cancelled
-- (cancel.lua: the worker missed the notice on its push channel), 3 its
-- run time is over (timed out: the job is failed, or will be, by the
-- reclaim sweep).
local active = KEYS[1]
local lease = tonumber(ARGV[1])
local J = columns(KEYS, 2)
expect_types({active, 'zset'})
local now = now_ms()
local deadline = now + lease
local ids = {}
for i = 2, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
local s = hmget(J.s, ids)
local ends = zmscore_sparse(KEYS[9], ids)
local entries = false
for i = 1, #ids do if ends[i] then entries = true; break end end
if entries then
  -- an entry counts only for a job with a timeout: one left by an earlier
  -- job of the id (it ended before its time) does not
  local o = hmget(J.o, ids)
  for i = 1, #ids do
    if ends[i] and not select(4, parse_options(o[i])) then ends[i] = false end
  end
end
local out, za, lost = {}, {}, {}
for i, id in ipairs(ids) do
  local state, _, t = state_of(s[i])
  local tok = ARGV[2 * i + 1]
  local e = ends[i] and tonumber(ends[i])
  if state == 'active' and t == tok then
    if e and e <= now then
      out[i] = 3
    else
      za[#za + 1] = int(e and e < deadline and e or deadline); za[#za + 1] = id
      out[i] = 1
    end
  elseif state == 'cancelled' and t == tok then
    out[i] = 2
  else
    out[i] = 0
    lost[#lost + 1] = i
  end
end
-- A lost lease may be the sweep's doing: a job it failed as timed out
-- keeps "<the claim's token> timeout" in failtoken (reclaim.lua).
if #lost > 0 then
  local l = {}
  for k, i in ipairs(lost) do l[k] = ids[i] end
  local f = hmget(J.f, l)
  for k, i in ipairs(lost) do
    if f[k] == ARGV[2 * i + 1] .. ' timeout' then out[i] = 3 end
  end
end
if #za > 0 then
  for i = 1, #za, 2 * CHUNK do
    redis.call('ZADD', active, 'XX', unpack(za, i, math.min(i + 2 * CHUNK - 1, #za)))
  end
end
return out
