-- complete: finish a batch of claimed jobs with their results. Each job is
-- checked against its fencing token; a stale token changes nothing. Then,
-- in batches (sweep_due in lib.lua), the records of completed jobs past
-- the retention time or beyond the count cap are deleted (oldest first, a
-- bounded number per call; the reclaim sweep deletes them too, so an idle
-- queue is cleaned up as well).
-- Workers that were idle offer the slots these jobs free for push
-- delivery (offer_slots in lib.lua), unless work is waiting.
-- The batch also drops the held index's members of tokens whose jobs have
-- all left their worker (forget in lib.lua).
-- A job with a timeout whose run time is over (its entry in deadlines,
-- see start_jobs in lib.lua, by the server's clock now) is refused as
-- lease lost and nothing of it changes, whether or not a reclaim sweep
-- has failed it as timed out yet (one will: that is the attempt's
-- outcome). A job without a timeout whose lease merely ran out is still
-- completed while no sweep or other worker took it: its token still
-- matches, and the token is what fences it.
-- KEYS (src/keys.def; bound to these locals): active, completed, stats,
--       ready, prio, idle, cols, monitored, events, held, dedup, deadlines, groups,
--       deps, dependents, depsfin, delayed, waiting, wake, depsfinc
-- ARGV: 1 job name prefix, 2 retention ms (-1: no age limit), 3 most
--       completed jobs kept (<= 0: no count limit), 4 number of offers,
--       5 number of tokens to forget, then per offer: idle field, epoch,
--       lease ms, slots; then the tokens to forget; then the jobs in
--       runs of one tail: "<attempt> <token>" (the tail of the state the
--       claim wrote, see the state column in lib.lua: the jobs of one
--       claim share it), the run's number of jobs, then per job its id and
--       result (the tail once per run: an argument costs Redis ~1.2k
--       instructions, callgrind).
-- Returns one code per job: 1 done (or already done with this token),
-- 0 lease lost (or its run time is over), 2 cancelled (cancel.lua), 3
-- done and it has dependents of other queues to release; then one per
-- offer: 1 registered, 0 not (work is waiting, the queue is paused or
-- limited, or the worker's registration has another epoch: the worker
-- then claims); then per job of code 3, in job order, its id and its
-- dependents entry ("<queue> <id>" lines, deps_watch.lua), which the
-- client releases (deps.c: no deps_due.lua call). Dependents waiting in
-- this queue are released by this call: a job's one dependent waiting for
-- it alone before the loop over the jobs done (DEPS.release_ones in
-- lib.lua), the others after it (DEPS.finished).
local prefix, retention, cap, offers = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local OFFERS = 6 -- ARGV index of the first offer
local FORGET = OFFERS + 4 * offers -- of the first token to forget
local FIRST = FORGET + tonumber(ARGV[5]) -- of the first job
local J = columns(cols, prefix)
J.u = dedup
J.dp = deps
J.df = depsfin
J.dt = dependents -- (the retention sweep keeps the records of jobs with dependents to release)
-- Wrongly typed keys are refused before the first write: the reads below
-- check theirs, the first three writes check their own (the count of
-- retained jobs, whose reply says whether the retention sweep is due, then
-- the RPUSH of the retention index, each undone when a later check or
-- the ZREM of active that follows them is refused: undoable in lib.lua),
-- the rest get a TYPE after the count, undoing it when refused (result
-- only when a result will be written; every column and dedup, and the
-- sweep's own counter, when the retention sweep is due, as it deletes
-- records).
if FIRST > FORGET then expect_types({held, 'zset'}) end
local stamp = now_stamp() -- (the text, made once from TIME's reply)
local now = tonumber(stamp)
-- The jobs' ids in order (ids) and their runs (runs: the ARGV index of
-- each run's tail, in order): job i's tail and result are found from
-- its run as the loop below walks them (no per-job tables of tails and
-- result indexes: ~3 table writes and reads a job), rix(i) in the rare
-- paths.
local ids, runs, m = {}, {}, 0
local at = FIRST
while at <= #ARGV do
  local cnt = tonumber(ARGV[at + 1])
  if not cnt or cnt < 1 or cnt ~= math.floor(cnt) or at + 1 + 2 * cnt > #ARGV then
    error({err = 'ERR complete: a run of jobs is cut short or has no count'})
  end
  runs[#runs + 1] = at
  for j = at + 2, at + 2 * cnt, 2 do m = m + 1; ids[m] = ARGV[j] end
  at = at + 2 + 2 * cnt
end
-- The ARGV index of job i's result.
local function rix(i)
  for _, a in ipairs(runs) do
    local cnt = tonumber(ARGV[a + 1])
    if i <= cnt then return a + 1 + 2 * i end
    i = i - cnt
  end
end
-- Whether a monitor listens, jobs have run-time limits and (for offers)
-- jobs wait, with one EXISTS: these keys exist while they have members,
-- so 0 (the usual case) answers the monitor's EXISTS, the EXISTS of
-- deadlines and the offers' LLEN ready and ZCARD prio at once; else
-- deadlines, ready and prio are asked (ready and prio with their type
-- check: a wrongly typed key exists) and the monitor key is what the
-- count leaves.
-- (and whether jobs of groups live: the groups' job hash, README "Groups";
-- and whether jobs have dependents of this queue: the dependents hash,
-- whose entries are what tells of those, DEPS.register in lib.lua; and
-- whether jobs have watchers: the watchers column, read only then, for a
-- batch of SPARSE_MIN jobs or more, where it was an EXISTS of its own,
-- hmget_sparse; a smaller one reads it at once, as before)
local gjob = groups .. 'job'
local wprobe = #ids >= SPARSE_MIN
local probe = {monitored, deadlines, gjob, dependents}
if wprobe then probe[#probe + 1] = J.n end
if offers > 0 then probe[#probe + 1] = ready; probe[#probe + 1] = prio end
local exist = redis.call('EXISTS', unpack(probe))
local has_deadlines, monitored_on, work_waits, has_groups, has_dependents = false, false, false, false, false
local has_watchers = false
if exist > 0 then
  -- deadlines, gjob, dependents and watchers in one EXISTS, counted 1, 2,
  -- 4 and 8 times (EXISTS counts a key named twice twice): its bits
  local b = wprobe and redis.call('EXISTS', deadlines, gjob, gjob, dependents, dependents, dependents, dependents,
                                  J.n, J.n, J.n, J.n, J.n, J.n, J.n, J.n) or
            redis.call('EXISTS', deadlines, gjob, gjob, dependents, dependents, dependents, dependents)
  has_deadlines, has_groups, has_dependents, has_watchers = b % 2 == 1, b % 4 >= 2, b % 8 >= 4, b >= 8
  local w = 0
  if offers > 0 then
    local nr, np = typed('list', 'LLEN', ready), typed('zset', 'ZCARD', prio)
    work_waits = nr > 0 or np > 0
    w = (nr > 0 and 1 or 0) + (np > 0 and 1 or 0)
  end
  -- what the count leaves is the monitor key
  monitored_on = exist - w - (has_deadlines and 1 or 0) - (has_groups and 1 or 0) - (has_dependents and 1 or 0) -
                 (has_watchers and 1 or 0) > 0
end
local emit = monitor(monitored, events, nil, monitored_on)

local s, n = hmget(J.s, ids, 'hash'), (has_watchers or not wprobe) and hmget(J.n, ids, 'hash') or {}
-- late[i]: job i's run time is over. An entry of deadlines counts only
-- for a job with a timeout (one left by an earlier job of the id does
-- not, as in extend.lua); most queues have no such key: one EXISTS.
local late = {}
if has_deadlines then
  local past, ends = {}, {}
  for i = 1, #ids, CHUNK do
    local part = typed('zset', 'ZMSCORE', deadlines, unpack(ids, i, math.min(i + CHUNK - 1, #ids)))
    for j = 1, #part do ends[#ends + 1] = part[j] end
  end
  for i = 1, #ids do
    if ends[i] and tonumber(ends[i]) <= now then past[#past + 1] = i end
  end
  if #past > 0 then
    local pid = {}
    for k, i in ipairs(past) do pid[k] = ids[i] end
    local o = hmget(J.o, pid, 'hash')
    for k, i in ipairs(past) do
      if select(4, parse_options(o[k])) then late[i] = true end
    end
  end
end
-- Idle workers offer their slots only while no work is waiting; then
-- their registrations are read here, before the first write (idle_v:
-- field -> value, false when absent).
-- (work_waits: read above)
local idle_v = {}
if offers > 0 and not work_waits then
  local f = {}
  for i = OFFERS, FORGET - 1, 4 do f[#f + 1] = ARGV[i] end
  f[#f + 1] = CONTROL_MARK -- a paused or limited queue takes no offers
  local v = typed('hash', 'HMGET', idle, unpack(f))
  if v[#f] then work_waits = true end
  for j = 1, #f - 1 do idle_v[f[j]] = v[j] end
end
-- (Per-job appends use a counter: #t is a search on every call.) The
-- token check compares the head of state values: the claim's is "active "
-- plus the tail the client sends, then its times (lib.lua), which is
-- cheaper than parsing the state (-12% of this script's Redis instructions
-- per job, callgrind). The jobs of a claim share their tail (attempt and
-- token), so the heads are made once per tail, not per job.
-- is(v, head): state value v is head, or head then ' ' and its times.
local function is(v, head)
  return v and string.find(v, head, 1, true) == 1 and
         (#v == #head or string.byte(v, #head + 1) == 32)
end
local out, gone, st, res, fresh, k, nr = {}, {}, {}, {}, {}, 0, 0
local tail_of, active_v, done_v = nil, nil, nil
-- The value a claim writes is the head, then " @<enqueued>,<start>," (no
-- end yet): its head is compared as one string and its times taken with
-- one anchored find after it (with is, state_times and times_ended this
-- loop took 17k Redis instructions per job, now 7k; other values take the
-- long way).
-- A job whose state is the job's before it (the same string: Lua interns
-- them, so one comparison), of the same tail, gets the same completed
-- value: a claim's jobs of one enqueue call share their state ("active
-- <attempt> <token> @<enqueued>,<start>,"), so a run's is read and made
-- once (the compare, find and concatenation: ~4k Redis instructions a job,
-- callgrind).
local after, last_s, last_v
local run, run_end, ri = 0, 0, 0 -- (the run walked: its number, its last job's i, the result's ARGV index)
for i, id in ipairs(ids) do
  if i > run_end then
    run = run + 1
    local a = runs[run]
    local tail = ARGV[a]
    run_end, ri = run_end + tonumber(ARGV[a + 1]), a + 1
    if tail ~= tail_of then
      tail_of, active_v, done_v = tail, 'active ' .. tail, 'completed ' .. tail
      after = #active_v + 1
      last_s = nil
    end
  end
  ri = ri + 2
  local r = ARGV[ri]
  local sv = s[i]
  local _, times, v
  if sv and sv == last_s then
    v = last_v
  elseif sv and string.sub(sv, 1, after - 1) == active_v then
    _, _, times = string.find(sv, '^( @%d*,%d*,)$', after)
  end
  local held = v or times or is(sv, active_v)
  if held and late[i] then
    out[i] = 0 -- past its run time: lease lost, nothing changed
  elseif held then
    k = k + 1
    gone[k] = id; fresh[k] = i
    -- its times with the end (the start its claim wrote: after the head)
    if not v then
      if times then
        v = done_v .. times .. stamp
        last_s, last_v = sv, v
      else
        v = done_v .. ' @' .. times_ended(state_times(sv), stamp)
        -- (format 2: a reply channel at the state's end is told as a
        -- watcher; a state reused above has none: the anchored find that
        -- set last_s ended it at its times)
        local ch = string.match(sv, '^%S+ %S+ %S+ @%S* (%S+)$')
        if ch then n[i] = n[i] and (n[i] .. ' ' .. ch) or ch end
      end
    end
    st[2 * k - 1] = id
    st[2 * k] = v
    if r ~= '' then
      res[nr + 1] = id; res[nr + 2] = r
      nr = nr + 2
    end
    out[i] = 1
  elseif is(s[i], done_v) then
    out[i] = 1 -- a retried completion whose first reply was lost
  elseif is(s[i], 'cancelled ' .. tail_of) then
    out[i] = 2
  else
    out[i] = 0
  end
end

local with_deps = false -- the ids of jobs of code 3, listed after the offers
local DQ = nil -- the keys of this queue's releases (DEPS.finished), made once: dq()
local function dq()
  DQ = DQ or {ready = ready, prio = prio, delayed = delayed, stats = stats, waiting = waiting, deps = deps,
              dependents = dependents, depsfin = depsfin, depsfinc = depsfinc, wake = wake, emit = emit}
  return DQ
end
local lists = nil -- their dependents entries, when read here (ent below)
local kept, sweep = 0, false -- ids in the retention index after this call; sweep due?
if #gone > 0 then
  local u = undoable()
  kept = count_retained(stats, #gone, u) -- the first write
  sweep = u.guard(sweep_due, completed, kept, #gone, retention, cap, now)
  if sweep then
    u.check({J.d, 'hash', J.s, 'hash', J.o, 'hash', J.r, 'hash', J.e, 'hash', J.f, 'hash', J.n, 'hash',
             J.u, 'zset'})
    u.guard(int_fields, stats, 'swept') -- (the sweep counts)
  elseif nr > 0 then
    u.check({J.r, 'hash'})
  end
  index_completed(completed, stamp, gone, u)
  u.call('zset', nil, 'ZREM', active, unpack(gone, 1, math.min(CHUNK, #gone))) -- (not undone)
  if #gone > CHUNK then call_all('ZREM', active, gone, 1, nil, CHUNK + 1) end
  call_all('HSET', J.s, st, 2)
  if nr > 0 then call_all('HSET', J.r, res, 2) end -- (empty results are not stored)
  -- announced once the writes went through; a finished job has no
  -- watchers (the column holds unfinished jobs only, so it stays small)
  -- the dependents entries of the jobs done, when the queue has some
  -- (ent[k] for gone[k], false when none; a wrongly typed hash gives none,
  -- as in DEPS.finished): no dependent leaves a mark (DEPS.register)
  -- (the loop runs only when there is something to tell: dependents,
  -- watchers or a monitor; a drain's jobs have none: ~25 steps a call)
  local ent = has_dependents and try_all('HMGET', dependents, gone)
  -- (a job's one dependent waiting in this queue for it alone is released
  -- here, its entry then false: no DEPS.finished for it, lib.lua)
  -- (every entry released there, or none read: ent false, so a call
  -- without watchers or a monitor skips the loop below, as a drain's)
  if ent and select(2, DEPS.release_ones(J, dq(), gone, ent)) == 0 then ent = false end
  local told = {}
  lists = ent and {} or nil
  with_deps = {}
  for j, i in ipairs((ent or next(n) or emit ~= UNMONITORED) and fresh or {}) do
    local has = ent and ent[j]
    if n[i] then
      DEPS_TOLD[1] = false
      notify(n[i], prefix .. ids[i], 'completed', ARGV[rix(i)])
      has = has or DEPS_TOLD[1] -- (dependents to release: lib.lua DEPS_MARK)
      told[#told + 1] = ids[i]
    end
    if has then
      out[i] = 3
      with_deps[#with_deps + 1] = ids[i]
      if lists then lists[#lists + 1] = ent[j] end
    end
    if emit ~= UNMONITORED then emit('completed', ids[i]) end
  end
  if #told > 0 then call_all('HDEL', J.n, told) end
  -- the group slots these jobs held (groups_lib.lua)
  if has_groups then
    local by = GROUPS.release(groups, J, gone, {})
    local done = {}
    for id in pairs(by) do done[#done + 1] = id end
    if #done > 0 then call_all('HDEL', gjob, done) end
  end
end

if offers > 0 then
  for i = OFFERS, FORGET - 1, 4 do
    local got = 0
    if not work_waits then
      got, idle_v[ARGV[i]] = offer_slots(idle, ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]),
                                         false, idle_v[ARGV[i]])
    end
    out[#out + 1] = got > 0 and 1 or 0
  end
end

-- Dependents (only for jobs that have some: a plain completion runs no
-- command here): those waiting in this queue are released here, in this
-- call (DEPS.finished, lib.lua); each job with dependents elsewhere is of
-- code 3, with the entry left (indexed for the sweep in depsfin until
-- their releases went through: deps_done.lua), the others of code 1.
if with_deps and #with_deps > 0 then
  local left = DEPS.finished(J, dq(), with_deps, 'completed', lists)
  local j = 0
  for i = 1, #ids do
    if out[i] == 3 then
      j = j + 1
      if left[2 * j] == '' then out[i] = 1 end
    end
  end
  for i = 1, #left, 2 do
    if left[i + 1] ~= '' then out[#out + 1] = left[i]; out[#out + 1] = left[i + 1] end
  end
end

for i = FORGET, FIRST - 1 do
  redis.call('ZREMRANGEBYLEX', held, held_range(ARGV[i] .. ' '))
end

-- Retention, in batches (sweep_due): delete up to twice as many old
-- records as can have come since the last look.
if sweep then
  sweep_completed(J, completed, stats, retention, cap, now, 2 * (#gone + SWEEP_EVERY), kept)
end
return out
