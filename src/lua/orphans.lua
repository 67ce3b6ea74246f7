-- orphans: the jobs a client held in this queue when it was found dead
-- (its liveness entry ran out, beat.lua) go back at once, without waiting
-- for their leases (which may be long), as the reclaim sweep would return
-- them: the attempt counts; dead when attempts are spent. Its members of
-- the held index (lib.lua) go too. Its pushed jobs (no member: push_to_idle)
-- are found by a scan of active (active_under), once no member is left.
-- A job of a group goes back to its group (its slot freed, the group
-- offered again: GROUPS.release, GROUPS.after), as reclaim.lua returns it.
-- A job returned dead (attempts spent) with dependents: those waiting in
-- this queue are counted here (DEPS.finished in lib.lua, as fail.lua
-- does); the entries of the others follow in the reply, which the client
-- releases at once (deps.c).
-- KEYS (src/keys.def; bound to these locals): held, active, ready, prio,
--       dead, stats, cols, monitored, events, dedup, deps, depsfin, groups,
--       delayed, waiting, dependents
-- ARGV: 1 job name prefix, 2 wake channel, 3 the client's token prefix
--       "<client>.", 4 most members per call, 5 dead cap, 6 the sweep's
--       lease end (server ms): a call that runs later does nothing (the
--       client may be back and holding new jobs; beat.lua told it to start
--       none until then)
-- Returns { jobs returned, 1 when members or jobs are left (call again)
-- else 0, then per dead job with dependents of other queues its id and
-- its dependents entry (also of the jobs of this queue its death buried
-- by their policy 'fail'), all dead }: at most ARGV 4 members, or ARGV 4
-- jobs found by the scan, per call.
local prefix, wake, who, limit, dead_max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
if now >= tonumber(ARGV[6]) then return {0, 0} end
local J = columns(cols, prefix)
J.u = dedup
J.dp = deps
J.df = depsfin -- (a job finished with dependents is indexed for the sweep: notify_finished)
expect_types({held, 'zset', active, 'zset', ready, 'list', prio, 'zset', dead, 'zset', stats, 'hash',
              J.s, 'hash', J.e, 'hash', J.u, 'zset', J.dp, 'hash', J.a, 'hash', J.n, 'hash'})
local members = held_members(held, who, limit)
-- no member left: its pushed jobs, by their tokens (at most limit)
local scanned, more = {}, #members == limit
if not more then
  local seen = {} -- (the members' jobs: returned below)
  for _, m in ipairs(members) do
    for _, id in ipairs(select(2, held_split(m))) do seen[id] = true end
  end
  local toks, by = active_under(active, J, who, nil, seen)
  for _, t in ipairs(toks) do
    for _, id in ipairs(by[t]) do
      if #scanned == 2 * limit then more = true; break end
      scanned[#scanned + 1] = t; scanned[#scanned + 1] = id
    end
  end
end
-- the counters the returns count (bury's dead, reclaimed), before the
-- first write: a HINCRBY refused after the ZREM below lost the job
if #members > 0 or #scanned > 0 then int_fields(stats, 'dead', 'reclaimed') end
local q = {ready = ready, prio = prio, dead = dead, stats = stats, wake = wake, now = now, dead_max = dead_max,
           emit = monitor_and_dependents(J, monitored, events, dependents)} -- (J.dt: notify_finished)
-- the jobs to return: {id, attempts, token, times}
local lost, took = {}, {}
for _, m in ipairs(members) do
  local t, ids = held_split(m)
  local s = hmget(J.s, ids)
  for i, id in ipairs(ids) do
    local state, attempts, t2, tm = state_of(s[i])
    if state == 'active' and t2 == t and not took[id] then
      took[id] = true
      lost[#lost + 1] = {id, attempts, t, tm}
    end
  end
  redis.call('ZREM', held, m)
end
for i = 1, #scanned, 2 do
  local t, id = scanned[i], scanned[i + 1]
  local sv = redis.call('HMGET', J.s, id)
  local _, attempts, _t, tm = state_of(sv[1])
  -- (format 2: a pushed job's reply channel in its state goes to the
  -- watchers column before return_lost writes the state)
  channels_out(J, {id}, sv)
  lost[#lost + 1] = {id, attempts, t, tm}
end
local n = #lost
if n > 0 then
  -- jobs of groups: their slots are freed (for all of them at once), and
  -- they go back to their groups, as reclaim.lua returns them (README
  -- "Groups", groups_lib.lua)
  local ids = {}
  for i, l in ipairs(lost) do ids[i] = l[1] end
  local o = hmget(J.o, ids)
  call_all('ZREM', active, ids)
  local gc = {}
  local gof = GROUPS.release_hinted(groups, J, ids, o, gc)
  local gdone, died = {}, {}
  for i, l in ipairs(lost) do
    local id, g = l[1], gof[l[1]]
    DEPS_TOLD[1] = false
    local st = return_lost(J, g and GROUPS.q(groups, q, g) or q, id, l[2], o[i], 'worker lost', l[3], l[4])
    if g then gdone[#gdone + 1] = {g, id, st} end
    if st == 'dead' and DEPS_TOLD[1] then died[#died + 1] = id end -- (dependents to release)
  end
  if #gdone > 0 then GROUPS.after(groups, J, gdone, gc, stats) end
  redis.call('HINCRBY', stats, 'reclaimed', n)
  if #died > 0 then
    local out = {n, more and 1 or 0}
    local left, buried = DEPS.finished(J, {ready = ready, prio = prio, delayed = delayed, stats = stats,
                                           waiting = waiting, deps = deps, dead = dead, dependents = dependents,
                                           depsfin = depsfin, wake = wake, dead_max = dead_max, emit = q.emit},
                                       died, 'dead')
    for k = 1, #left, 2 do
      if left[k + 1] ~= '' then out[#out + 1] = left[k]; out[#out + 1] = left[k + 1] end
    end
    for k = 1, #buried do out[#out + 1] = buried[k] end
    return out
  end
end
return {n, more and 1 or 0}
