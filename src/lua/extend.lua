-- extend: push back the lease deadline of running jobs still held with
-- these tokens. A job with a timeout is never extended past the end of
-- its run time (deadlines, see start_jobs in lib.lua): once that has come,
-- its lease is left to run out (the reclaim sweep then fails it as timed
-- out, and tells its holder on its push channel) and its holder is told
-- here too (it may have missed that message).
-- KEYS: 1 active, 2..8 the job columns, 9 deadlines
-- ARGV: 1 lease ms, then per job: id, token, start (server ms at which
--       the holder's claim of it started, as it knows it: its claim
--       reply's deadline - lease, which a re-sent claim gives uncapped too,
--       see claim.lua; 0: unknown)
-- Returns one code per job: 1 extended, 0 lease lost, 2 cancelled
-- (cancel.lua: the worker missed the notice on its push channel), 3 its
-- run time is over (timed out: the job is failed, or will be, by the
-- reclaim sweep). A lost lease is 3 as well when the sweep failed the job
-- as timed out under this token (its failtoken), or when the job has a
-- timeout and start + timeout has passed: a later attempt of the job may
-- have overwritten the failtoken since (its own timeout), and the holder
-- of each attempt is told.
local active = KEYS[1]
local lease = tonumber(ARGV[1])
local J = columns(KEYS, 2)
expect_types({active, 'zset'})
local now = now_ms()
local deadline = now + lease
local ids = {}
for i = 2, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
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
  local tok = ARGV[3 * i]
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
-- keeps "<the claim's token> timeout" in failtoken (reclaim.lua), until a
-- later attempt's timeout replaces it; so a lost job with a timeout whose
-- claim started at least that long ago is timed out too.
if #lost > 0 then
  local l = {}
  for k, i in ipairs(lost) do l[k] = ids[i] end
  local f, o = hmget(J.f, l), hmget(J.o, l)
  for k, i in ipairs(lost) do
    local tmo = select(4, parse_options(o[k]))
    local start = tonumber(ARGV[3 * i + 1]) or 0
    if f[k] == ARGV[3 * i] .. ' timeout' or (tmo and start > 0 and start + tmo <= now) then
      out[i] = 3
    end
  end
end
if #za > 0 then
  for i = 1, #za, 2 * CHUNK do
    redis.call('ZADD', active, 'XX', unpack(za, i, math.min(i + 2 * CHUNK - 1, #za)))
  end
end
return out
