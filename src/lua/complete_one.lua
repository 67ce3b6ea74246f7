-- complete_one: the lean completion of ONE job, with at most one offer and
-- no tokens to forget (a pushed job's completion: src/job.c decides from
-- what it sends). It writes exactly what complete.lua writes for that job
-- (the retained count, the retention index entry, the lease's removal, the
-- state with its end time, the result, the outcome to its watchers, the
-- offer's registration, the monitor's event), so every other script
-- handles the job as one complete.lua finished; it skips complete.lua's
-- batch machinery, whose Lua is most of a completion's Redis work
-- (docs/scripts.md, "The lean pair").
-- It answers a negative number instead, with nothing written, where
-- complete.lua has work it does not do: -1 when the queue has jobs with
-- run-time limits (deadlines) or jobs of groups (the client then sends the
-- queue's completions to complete.lua for a while), -2 when the job has
-- dependents to release (its watchers hold DEPS_MARK) or this completion
-- makes the retention sweep due. The client then sends the same
-- completion to complete.lua (a completion may be sent again: the token
-- makes it once).
-- KEYS (src/keys.def; bound to these locals): active, completed, stats,
--       ready, prio, idle, monitored, events, deadlines, groups, scol
--       (state column), rcol (result column), wcol (watchers column)
-- ARGV: 1 job name prefix, 2 retention ms (-1: no age limit), 3 most
--       completed jobs kept (<= 0: no count limit), 4 the offer's idle
--       field ('': no offer), 5 its epoch, 6 lease ms, 7 slots, 8 the job's
--       id, 9 "<attempt> <token>", 10 result.
-- Returns complete.lua's reply: the job's code (1 done, or already done
-- with this token; 0 lease lost; 2 cancelled), then, with an offer, 1
-- registered or 0 not; or -1 or -2 (see above).
local prefix, retention, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local field, id, tail, r = ARGV[4], ARGV[8], ARGV[9], ARGV[10]
local NOT_LEAN, NOT_THIS = -1, -2
local now = now_ms()
local stamp = int(now)
-- Whether a monitor listens, jobs have run-time limits or groups, and
-- (for an offer) jobs wait: one EXISTS, as complete.lua.
local gjob = groups .. 'job'
local exist
if field ~= '' then exist = redis.call('EXISTS', monitored, deadlines, gjob, ready, prio)
else exist = redis.call('EXISTS', monitored, deadlines, gjob) end
local waiting, monitored_on = false, false
if exist > 0 then
  local w = 0
  if field ~= '' then
    local nr, np = typed('list', 'LLEN', ready), typed('zset', 'ZCARD', prio)
    waiting = nr > 0 or np > 0
    w = (nr > 0 and 1 or 0) + (np > 0 and 1 or 0)
  end
  if exist - w > 0 then
    if redis.call('EXISTS', deadlines, gjob) > 0 then return NOT_LEAN end
    monitored_on = true
  end
end
local s = typed('hash', 'HMGET', scol, id)[1]
local n = typed('hash', 'HMGET', wcol, id)[1]
if n and string.find(n, DEPS_MARK, 1, true) then return NOT_THIS end
-- the offer's registration, read before the first write (complete.lua)
local v = false
if field ~= '' and not waiting then
  local got = typed('hash', 'HMGET', idle, field, CONTROL_MARK)
  v = got[1]
  if got[2] then waiting = true end
end
-- the token check by the head of the state value (complete.lua's is())
local function is(head)
  return s and string.find(s, head, 1, true) == 1 and (#s == #head or string.byte(s, #head + 1) == 32)
end
local code = 0
local done_v = 'completed ' .. tail
if is('active ' .. tail) then
  -- the first write counts the retained jobs; undone (nothing written)
  -- when the sweep is due: complete.lua sweeps
  local u = undoable()
  local kept = count_retained(stats, 1, u)
  if u.guard(sweep_due, completed, kept, 1, retention, cap, now) then
    if kept == 1 then redis.call('HDEL', stats, 'retained')
    else redis.call('HINCRBY', stats, 'retained', -1) end
    return NOT_THIS
  end
  if r ~= '' then u.check({rcol, 'hash'}) end
  index_completed(completed, stamp, {id}, u)
  u.call('zset', nil, 'ZREM', active, id) -- (not undone)
  redis.call('HSET', scol, id, done_v .. ' @' .. times_ended(state_times(s), stamp))
  if r ~= '' then redis.call('HSET', rcol, id, r) end -- (empty results are not stored)
  if n then
    notify(n, prefix .. id, 'completed', r)
    redis.call('HDEL', wcol, id)
  end
  if monitored_on then monitor(monitored, events, now, true)('completed', id) end
  code = 1
elseif is(done_v) then
  code = 1 -- a retried completion whose first reply was lost
elseif is('cancelled ' .. tail) then
  code = 2
end
if field == '' then return {code} end
local got = 0
if not waiting then
  got = offer_slots(idle, field, ARGV[5], ARGV[6], tonumber(ARGV[7]), false, v)
end
return {code, got > 0 and 1 or 0}
