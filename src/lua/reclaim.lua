-- reclaim: jobs whose lease expired (their worker died or hung) go back to
-- the head of ready, or to dead when their attempts are spent. One sweeper
-- per period: the guard key is taken with SET NX PX. Cost is proportional
-- to the expired jobs, not to the active set.
-- The sweeper also applies retention to completed jobs (see
-- sweep_completed), so records go away even when no completions come.
-- KEYS (src/keys.def; bound to these locals): active, ready, prio, dead,
--       stats, guard, completed, cols, monitored, events, push, delayed,
--       meta, deadlines, dedup, dependents, waiting, groups, deps, depsfin,
--       batchend, depsfinc
-- ARGV: 1 job name prefix, 2 wake channel, 3 guard ms (0: no guard),
--       4 max jobs, 5 dead cap, 6 retention ms, 7 completed cap, 8 look
--       (1: also say how many jobs wait), 9 jitter in [0,1) (backoff)
-- A job whose run time is over (its timeout: deadlines, see start_jobs)
-- is failed as timed out, under its retry policy (backoff, then dead once
-- its attempts are spent), not returned as lost; its holder's client is
-- told on its push channel ("!timeout <token> <id>", as cancel.lua tells
-- a cancel), and its failtoken is "<the claim's token> timeout", so a
-- holder that missed that message hears it from its next extension
-- (extend.lua); its late completion or failure is refused (complete.lua,
-- fail.lua: lease lost).
-- Entries of deadlines that are past are dropped (jobs that finished), as
-- are reservations of the dedup set that are over.
-- Returns the number of jobs reclaimed (returned as lost, or failed as
-- timed out; the stats count the first as reclaimed, the second as
-- failed), or -1 when another sweeper holds the guard; with look, { that,
-- the jobs ready or due } (a client's periodic visit: its idle workers
-- claim when jobs wait that no doorbell announced to them; a paused queue
-- has none for them, and 1 when this sweeper holds the guard and jobs of
-- the queue finished with dependents not all released (depsfin), plus 2 when jobs waiting for their
-- dependencies are due for a registration again (deps_resume.lua), plus 4
-- when ended batches of the queue are past their retention (batchend),
-- else 0: the client then sweeps their releases, deps_due.lua, resumes
-- their registrations, and deletes those batches, batch.lua's sweep).
-- A job this sweep made dead (attempts spent, or timed out) with
-- dependents: those waiting in this queue are counted here (DEPS.finished
-- in lib.lua, as fail.lua does); when dependents of other queues are left,
-- the reply is the array above (without look: { jobs reclaimed }) followed
-- by per job its id and its dependents entry (also of the jobs of this
-- queue its death buried by their policy 'fail'), all dead, which the
-- client releases at once (deps.c).
local prefix, wake, guard_ms, limit, dead_max = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local retention, cap, look, jitter = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] == '1', tonumber(ARGV[9])
local J = columns(cols, prefix)
J.u = dedup
J.dp = deps
J.df = depsfin -- (a job finished with dependents is indexed for the sweep: notify_finished)
J.dt = dependents -- (the retention sweep keeps the records of jobs with dependents to release)
-- (every column: the retention sweep deletes records in all of them)
local now = now_ms()
-- First a look, by reads that are their own type checks (typed): leases
-- expired, completed jobs past retention or over the cap (as
-- sweep_completed judges its head). A visit that finds neither (an idle
-- queue's, once a second per client) checks only the types of the keys
-- it goes on to touch, not every column's: 21 commands instead of 33.
local ids = typed('zset', 'ZRANGEBYSCORE', active, '-inf', now, 'LIMIT', 0, limit)
local kept = int_fields(stats, 'retained', 'swept')[1] or 0
local head = typed('list', 'LINDEX', completed, 0)
local stamp = head and tonumber(string.match(head, '^%d+'))
local idle = #ids == 0 and (head and stamp and not ((retention >= 0 and stamp <= now - retention) or
                                                   (cap > 0 and kept > cap))
                            or not head and kept == 0)
if idle then
  expect_types({ready, 'list', prio, 'zset', delayed, 'zset', deadlines, 'zset', J.u, 'zset'})
else
  expect_types({ready, 'list', prio, 'zset', dead, 'zset',
                J.d, 'hash', J.s, 'hash', J.o, 'hash', J.r, 'hash', J.e, 'hash', J.f, 'hash', J.n, 'hash',
                delayed, 'zset', deadlines, 'zset', J.u, 'zset', J.dp, 'hash', J.a, 'hash'})
end
local entries = {} -- (id, dependents entry) of the dead with dependents of other queues
local function result(n)
  if not look then
    if #entries == 0 then return n end
    local out = {n}
    for i = 1, #entries do out[#out + 1] = entries[i] end
    return out
  end
  -- (the sweeper, holding the guard, also sweeps the dependents' releases
  -- and the ended batches: one EXISTS of the keys (depsfin, depsfinc: the
  -- sweep's index, lib.lua DEPSFIN_MEMBER), so a queue that never had a
  -- batch reads no more than before batches; batchend's first entry is
  -- read only when one of them exists, and tells which)
  local d, e = 0, n >= 0 and redis.call('EXISTS', depsfin, depsfinc, batchend) or 0
  if e > 0 then
    -- (a wrongly typed batchend stops no reclaim: the batch calls refuse it)
    local first = redis.pcall('ZRANGEBYSCORE', batchend, '-inf', '+inf', 'LIMIT', 0, 1, 'WITHSCORES')
    if first.err or #first > 0 then e = e - 1 end
    if e > 0 then d = 1 end
    if not first.err and #first > 0 and tonumber(first[2]) <= now then d = d + 4 end
  end
  if n >= 0 and #typed('zset', 'ZRANGEBYSCORE', waiting, '-inf', now - DEPS_RESUME_MS, 'LIMIT', 0, 1) > 0 then
    d = d + 2
  end
  local out
  if redis.call('HEXISTS', meta, 'paused') == 1 then
    out = {n, 0, d}
  else
    out = {n, redis.call('LLEN', ready) + redis.call('ZCARD', prio) +
              typed('zset', 'ZCOUNT', delayed, '-inf', now), d}
  end
  for i = 1, #entries do out[#out + 1] = entries[i] end
  return out
end
if guard_ms > 0 and not redis.call('SET', guard, '1', 'NX', 'PX', guard_ms) then
  return result(-1)
end
if not idle then sweep_completed(J, completed, stats, retention, cap, now, limit, kept) end
-- (every job whose run time is over is among these: its lease ends then)
local function drop_past_deadlines()
  if #ids < limit then redis.call('ZREMRANGEBYSCORE', deadlines, '-inf', now) end
  redis.call('ZREMRANGEBYSCORE', J.u, '-inf', now)
end
if #ids == 0 then drop_past_deadlines(); return result(0) end
local ends = zmscore_sparse(deadlines, ids)
-- The counters the jobs' moves count (fail_job, bury, a priority job's
-- sequence number, reclaimed), checked before the first of them: a
-- HINCRBY refused after the ZREM below lost every job it had taken out of
-- active. (A visit that finds no lease expired does not read them.)
int_fields(stats, 'failed', 'retried', 'dead', 'reclaimed', 'seq', 'skipped')
-- ids whose record is gone or not active (stale entries) are dropped
redis.call('ZREM', active, unpack(ids))
local q = {ready = ready, prio = prio, delayed = delayed, dead = dead, stats = stats, wake = wake, now = now,
           jitter = jitter, dead_max = dead_max, emit = monitor(monitored, events)}
local n, timed_out = 0, 0
-- jobs of groups: their slots are freed (for all of them at once), and
-- they go back to their groups (README "Groups", groups_lib.lua)
local gc, q0 = {}, q
local s, o = redis.call('HMGET', J.s, unpack(ids)), redis.call('HMGET', J.o, unpack(ids))
channels_out(J, ids, s) -- (format 2: reply channels in states go to the watchers first)
local gof = GROUPS.release_hinted(groups, J, ids, o, gc)
local gdone, died = {}, {}
for i, id in ipairs(ids) do
  local v = {s[i], o[i]}
  local state, attempts, tok, tm = state_of(v[1])
  local g = gof[id]
  q = g and GROUPS.q(groups, q0, g) or q0
  local st
  if state == 'active' then
    DEPS_TOLD[1] = false
    local e = ends[i] and tonumber(ends[i])
    local tmo = select(4, parse_options(v[2])) -- (an entry of a job without one is stale)
    if e and e <= now and tmo then
      timed_out = timed_out + 1
      -- its holder's client: the first part of the token (as in cancel.lua)
      local cid = tok and string.match(tok, '^([^.]+)%.')
      if cid then
        redis.call(PUB or pub_mode(), push .. cid, '!timeout ' .. tok .. ' ' .. id)
      end
      -- failtoken "<token> timeout": the holder's extension tells it (extend.lua),
      -- and its own late failure is refused (fail.lua)
      st = select(2, fail_job(J, q, id, (tok or '') .. ' timeout', attempts, v[2],
                              'timed out after ' .. int(tmo) .. ' ms', false, -1, tm))
    else
      n = n + 1
      st = return_lost(J, q, id, attempts, v[2], 'lease expired', tok, tm)
    end
    if g then gdone[#gdone + 1] = {g, id, st} end
    if st == 'dead' and DEPS_TOLD[1] then died[#died + 1] = id end -- (dependents to release)
  end
end
if #gdone > 0 then GROUPS.after(groups, J, gdone, gc, stats) end
if #died > 0 then
  local left, buried = DEPS.finished(J, {ready = ready, prio = prio, delayed = delayed, stats = stats,
                                         waiting = waiting, deps = deps, dead = dead, dependents = dependents,
                                         depsfin = depsfin, wake = wake, dead_max = dead_max, emit = q0.emit},
                                     died, 'dead')
  for k = 1, #left, 2 do
    if left[k + 1] ~= '' then entries[#entries + 1] = left[k]; entries[#entries + 1] = left[k + 1] end
  end
  for k = 1, #buried do entries[#entries + 1] = buried[k] end
end
drop_past_deadlines()
if n > 0 then redis.call('HINCRBY', stats, 'reclaimed', n) end
return result(n + timed_out)
