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
-- dependents to release (its watchers hold DEPS_MARK, or it has an entry
-- in dependents: those of its own queue leave no mark) or this completion
-- makes the retention sweep due. The client then sends the same
-- completion to complete.lua (a completion may be sent again: the token
-- makes it once).
-- KEYS (src/keys.def; bound to these locals): active, completed, stats,
--       ready, prio, idle, monitored, events, deadlines, groups, scol
--       (state column), rcol (result column), wcol (watchers column),
--       dependents
-- ARGV: 1 job name prefix, 2 retention ms (-1: no age limit), 3 most
--       completed jobs kept (<= 0: no count limit), 4 the offer's idle
--       field ('': no offer), 5 its epoch, 6 lease ms, 7 slots, 8 the job's
--       id, 9 "<attempt> <token>", 10 result.
-- Reads both queue formats (a reply channel in the state or in the
-- watchers column: see below).
-- Returns complete.lua's reply: the job's code (1 done, or already done
-- with this token; 0 lease lost; 2 cancelled), then, with an offer, 1
-- registered or 0 not; or -1 or -2 (see above).
local prefix = ARGV[1]
local field, id, tail, r = ARGV[4], ARGV[8], ARGV[9], ARGV[10]
local NOT_LEAN, NOT_THIS = -1, -2
local stamp = now_stamp() -- (the text, made once from TIME's reply; as a number only where needed)
-- Whether a monitor listens, jobs have run-time limits or groups, and
-- (for an offer) jobs wait, and whether jobs have dependents: one
-- EXISTS, as complete.lua.
local gjob = group_jobs_key(groups) -- (memoised: lib.lua)
local exist
if field ~= '' then exist = redis.call('EXISTS', monitored, deadlines, gjob, dependents, ready, prio)
else exist = redis.call('EXISTS', monitored, deadlines, gjob, dependents) end
local waiting, monitored_on, has_dependents = false, false, false
if exist > 0 then
  local w = 0
  if field ~= '' then
    local nr, np = typed('list', 'LLEN', ready), typed('zset', 'ZCARD', prio)
    waiting = nr > 0 or np > 0
    w = (nr > 0 and 1 or 0) + (np > 0 and 1 or 0)
  end
  if exist - w > 0 then
    -- dependents counted 3 times (EXISTS counts a key named twice twice)
    local b = redis.call('EXISTS', deadlines, gjob, dependents, dependents, dependents)
    if b % 3 > 0 then return NOT_LEAN end
    has_dependents = b >= 3
    monitored_on = exist - w - (has_dependents and 1 or 0) > 0
  end
end
-- (typed(), inline: each read checks its key's type)
local x = redis.pcall('HMGET', scol, id)
if x.err then lean_refuse(x, scol, 'hash') end
local s = x[1]
-- the token check by the head of the state value (complete.lua's is()),
-- written out: no closure per call
local head = 'active ' .. tail
local hl = #head
local mine = s and string.find(s, head, 1, true) == 1 and (#s == hl or string.byte(s, hl + 1) == 32)
-- queue format 2 (docs/scripts.md "Queue format 2"): a pushed awaited
-- job's reply channel at the end of its state ("<head> @<t>,<t>, <channel>")
-- is its only watcher (a script that adds one moves the channel to the
-- column first: lib.lua channels_out), so the column is neither read nor
-- cleared; else the column is read (format 1, a job without one there,
-- or a state of another token). One anchored match after the head: the
-- times (" @<t>,<t>,") and the channel (no space) as captures (aw36: one
-- C call where a find of the times, a find of a space and two subs were).
local sch, te
if mine and string.byte(s, #s) ~= 44 then
  te, sch = string.match(s, '^( @%d*,%d*,) ([^ ]+)$', hl + 1)
end
local n
if sch then
  n = sch
else
  x = redis.pcall('HMGET', wcol, id)
  if x.err then lean_refuse(x, wcol, 'hash') end
  n = x[1]
  if n and string.find(n, DEPS_MARK, 1, true) then return NOT_THIS end
end
-- (a wrongly typed dependents hash: no entry, as complete.lua reads it)
if has_dependents and redis.pcall('HEXISTS', dependents, id) == 1 then return NOT_THIS end
-- the offer's registration, read before the first write (complete.lua)
local v = false
if field ~= '' and not waiting then
  local got = redis.pcall('HMGET', idle, field, CONTROL_MARK)
  if got.err then lean_refuse(got, idle, 'hash') end
  v = got[1]
  if got[2] then waiting = true end
end
local code = 0
local failed -- a refused PUBLISH of the outcome (finish() returns it, after the writes)
if mine then
  -- the first write counts the retained jobs (it checks its own type:
  -- refused, nothing was written); undone (nothing written) when the
  -- sweep is due: complete.lua sweeps
  local kept = typed('hash', 'HINCRBY', stats, 'retained', '1') -- ('1': text, as Redis reads it)
  -- (sweep_due's answer written out for the usual call: the count not at
  -- a multiple of SWEEP_EVERY, where the age limit is not looked at, and
  -- no cap or one not passed; else sweep_due asks)
  local ok, due = true, false
  local cap = text_num(ARGV[3]) -- (memoised: lib.lua)
  if kept % SWEEP_EVERY == 0 or (cap > 0 and kept > cap) then
    ok, due = pcall(sweep_due, completed, kept, 1, ARGV[2] + 0, cap, tonumber(stamp))
  end
  if not ok or due then
    complete_one_undo(stats, kept)
    if not ok then error(due, 0) end
    return NOT_THIS
  end
  -- then the writes that check their own types, each undone when a later
  -- one is refused (lib.lua complete_one_undo; undoable()'s promise): the
  -- retention index entry, the result (its own HSET checks the column:
  -- no TYPE), the lease's removal
  local entry = stamp .. ' ' .. id
  x = redis.pcall('RPUSH', completed, entry)
  if type(x) == 'table' then
    complete_one_undo(stats, kept)
    lean_refuse(x, completed, 'list')
  end
  local rk, rlate -- the result written (undone by HDEL); to write after the lease's removal
  if r ~= '' then -- (empty results are not stored)
    x = redis.pcall('HSETNX', rcol, id, r)
    -- (x ~= 1 first where 1 is the usual reply: no type() call, ~250 Redis instructions)
    if x ~= 1 and type(x) == 'table' then
      complete_one_undo(stats, kept, completed, entry)
      lean_refuse(x, rcol, 'hash')
    end
    if x == 1 then
      rk = rcol
    else -- (the field was there, behind rjq's back: overwritten once active is checked)
      local ok2, e = pcall(expect_types, {active, 'zset'})
      if not ok2 then complete_one_undo(stats, kept, completed, entry); error(e, 0) end
      rlate = true
    end
  end
  x = redis.pcall('ZREM', active, id) -- (not undone)
  if x ~= 1 and type(x) == 'table' then
    complete_one_undo(stats, kept, completed, entry, rk, id)
    lean_refuse(x, active, 'zset')
  end
  if rlate then redis.call('HSET', rcol, id, r) end
  -- the state with its end time: a pushed job's "<head> @<enqueued>,<start>,"
  -- takes its times as they are (no captures: times_ended's value)
  if te then -- (format 2: the times as they are, the channel left out)
    redis.call('HSET', scol, id, 'completed ' .. tail .. te .. stamp)
  elseif string.find(s, '^ @%d*,%d*,$', hl + 1) then
    redis.call('HSET', scol, id, 'completed ' .. tail .. string.sub(s, hl + 1) .. stamp)
  else
    redis.call('HSET', scol, id, 'completed ' .. tail .. ' @' .. times_ended(state_times(s), stamp))
  end
  if n then
    -- one framed reply channel (an awaiting client's): its outcome message,
    -- published here as finish() would publish it (notify, OUTCOMES)
    if framed_reply(n) then -- (memoised: lib.lua)
      local k, kind, body = prefix .. id, 'completed', r
      if #body > INLINE_RESULT_MAX then kind, body = 'big', '' end
      local p = redis.pcall(PUB or pub_mode(), n, '+' .. kind .. ' ' .. num(#k) .. ' ' .. num(#body) .. '\n' .. k .. body)
      if p ~= 1 and type(p) == 'table' and p.err then failed = p end
    else
      notify(n, prefix .. id, 'completed', r)
    end
    if not sch then redis.call('HDEL', wcol, id) end
  end
  if monitored_on then monitor(monitored, events, tonumber(stamp), true)('completed', id) end
  code = 1
elseif s and string.find(s, 'completed ' .. tail, 1, true) == 1
       and (#s == hl + 3 or string.byte(s, hl + 4) == 32) then
  code = 1 -- a retried completion whose first reply was lost
elseif s and string.find(s, 'cancelled ' .. tail, 1, true) == 1
       and (#s == hl + 3 or string.byte(s, hl + 4) == 32) then
  code = 2
end
if field == '' then return failed or {code} end
local got = 0
if not waiting then
  -- a job whose state held its channel was active since its format-2
  -- enqueue, so the queue is format 2 now (qformat.lua refuses going back
  -- to 1 while a job is active): the registration is marked (lib.lua
  -- registration()), the next lean enqueue reads no meta
  got = offer_slots(idle, field, ARGV[5], ARGV[6], text_num(ARGV[7]), false, v, code == 1 and sch ~= nil)
end
return failed or {code, got > 0 and 1 or 0}
