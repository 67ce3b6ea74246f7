-- extend: push back the lease deadline of running jobs still held with
-- these tokens. A job with a timeout is never extended past the end of
-- its run time (deadlines, see start_jobs in lib.lua): once that has come,
-- its lease is left to run out (the reclaim sweep then fails it as timed
-- out, and tells its holder on its push channel) and its holder is told
-- here too (it may have missed that message).
-- KEYS (src/keys.def; bound to these locals): active, cols, deadlines, held
-- ARGV: 1 lease ms, then per job: id, token, start (server ms at which
--       the holder's claim of it started, as it knows it: its claim
--       reply's deadline - lease, which a re-sent claim gives uncapped too,
--       see claim.lua; 0: unknown); then per claim whose reply the
--       holder is still reading (a big payload in it may take longer than
--       the lease to arrive): '', its token, 0. The jobs it started (the
--       token's member of the held index) are extended as above while they
--       are still active under the token; its code is 1 when the claim has
--       run (it has a member), else 0.
-- Returns one code per job: 1 extended, 0 lease lost, 2 cancelled
-- (cancel.lua: the worker missed the notice on its push channel), 3 its
-- run time is over (timed out: the job is failed, or will be, by the
-- reclaim sweep). A lost lease is 3 as well when the sweep failed the job
-- as timed out under this token (its failtoken), or when the job has a
-- timeout and start + timeout has passed: a later attempt of the job may
-- have overwritten the failtoken since (its own timeout), and the holder
-- of each attempt is told.
local lease = tonumber(ARGV[1])
local J = columns(cols)
expect_types({active, 'zset'})
local now = now_ms()
local deadline = now + lease
local ids = {}
for i = 2, #ARGV, 3 do
  if ARGV[i] == '' then break end -- (the claims)
  ids[#ids + 1] = ARGV[i]
end
-- The run time's ends of jobs ids (false: none).
local function run_ends(ids)
  local ends = zmscore_sparse(deadlines, ids)
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
  return ends
end
-- (only claims in flight: no job to read; an HMGET with no field is refused,
-- and with it the claims' extension)
local s = #ids > 0 and hmget(J.s, ids) or {}
local ends = run_ends(ids)
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
-- The claims whose replies are on the way: their jobs still active under
-- their token, up to the end of their run time (one whose run time is over
-- is left to the sweep, and its holder finds out when it starts it).
for k = #ids + 1, (#ARGV - 1) / 3 do
  local tok = ARGV[3 * k]
  local m = held_members(held, tok .. ' ', 1)
  out[k] = #m > 0 and 1 or 0
  local jids = {}
  if m[1] then jids = select(2, held_split(m[1])) end
  if #jids > 0 then
    local js, je = hmget(J.s, jids), run_ends(jids)
    for i, id in ipairs(jids) do
      local state, _, t = state_of(js[i])
      local e = je[i] and tonumber(je[i])
      if state == 'active' and t == tok and not (e and e <= now) then
        za[#za + 1] = int(e and e < deadline and e or deadline); za[#za + 1] = id
      end
    end
  end
end
if #za > 0 then
  for i = 1, #za, 2 * CHUNK do
    redis.call('ZADD', active, 'XX', unpack(za, i, math.min(i + 2 * CHUNK - 1, #za)))
  end
end
return out
