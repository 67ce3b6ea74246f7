-- claim: promote due delayed jobs, then move up to `want` ready jobs to
-- active under the call's fencing token, each with a lease. A claim that
-- comes back short registers the slots it could not fill for push
-- delivery (offer_slots in lib.lua).
-- A claim is idempotent by its token: sent again after its reply was lost,
-- it finds its first run's member of the held index (lib.lua) and returns
-- the jobs still held under the token, doing nothing more, so no attempt
-- is spent by a lost reply.
-- A recovering claim (after the worker's push channel was resubscribed,
-- when pushes may have been lost) first takes over the jobs held under the
-- worker's other tokens that it does not name as known (ARGV 12..): up to
-- `want` of them go under this claim's token with a fresh lease (the rest
-- back to the queue, attempt undone), then it claims for the slots left.
-- A job pushed between the claim's send and its run is among them (the
-- worker could not name its token yet): it runs once, under this claim's
-- token (the push message, of the registration's older epoch, is then left
-- alone by the worker, src/push.c), its attempt, start and wait the push's.
-- (Pushed jobs have no member in the held index: they are found by a scan
-- of active, active_under in lib.lua.)
-- Its member is written even when it got nothing, so a re-send never
-- recovers a second time.
-- A paused queue (pause.lua) starts nothing: the claim registers no slots
-- and returns next = -2 (the worker waits for the doorbell that resuming
-- rings); a re-sent or recovering claim still returns the jobs it holds.
-- A queue with limits (limits.lua) starts at most what they allow: no
-- more jobs active than its concurrency, no more starts than its rate in
-- any window of its length (server time; the starts set logs each start
-- of the window). A claim held back by the rate returns as next the ms
-- until the window lets the next start in, so the worker wakes exactly
-- then; one held back by the concurrency is woken by a completion (its
-- worker's own, see complete.lua) or by the doorbell (below). A limited
-- queue has no push delivery: its claims register no slots.
-- Fair shares under the concurrency limit: the free slots go to the
-- workers that wait for them, least recently served first, whoever
-- freed them. A claim held back by the limit (fewer slots free for it
-- than it wants) enters its worker in the waiters hash (KEYS 19: field
-- the worker's idle field, value "<turn> <noticed>"; field '#' the last
-- turn given), keeping the turn it has while it gets nothing; one that
-- got jobs and still wants more takes a new turn (the back of the line);
-- one not held back leaves. While work is ready, a claim leaves one free
-- slot to each waiter whose turn is before its own (every waiter, for a
-- worker that does not wait) and takes only the rest: so the worker whose
-- completion freed a slot does not take it back while others wait. The
-- waiters a claim leaves slots to are noticed: when one was not yet, the
-- claim rings the doorbell, and they claim. A waiter that is gone (its
-- push channel has no subscriber) or did not claim within WAIT_GRACE_MS
-- of its notice loses its place; the claims held back behind it come
-- back (next) when that grace ends. (A stopping worker leaves the hash;
-- limits.lua clears it.)
-- KEYS (src/keys.def; bound to these locals): ready, prio, delayed, active,
--       stats, idle, cols, monitored, events, held, meta, deadlines, starts,
--       waiters, groups
-- ARGV: 1 job name prefix, 2 want (<= 1000: unpack() below holds 2*want
--       values, and Lua's limit is ~8000), 3 lease ms, 4 token
--       ("<client>.<worker>.<unique>", new for every call), 5 wake channel,
--       6 the worker's idle field, 7 its registration epoch, 8 reset (1:
--       replace the registration), 9 recover (1/0), 10 payloads (1: in
--       the reply; 0: not, the worker reads them itself; 3 and 2 the same
--       with the jobs in runs, below), 11 extra: slots
--       registered beyond the unfilled ones when the claim comes back short
--       (a sharded queue's worker, whose claim its slot budget made smaller
--       than the slots it has for this shard; 0 or absent: none), 12.. the
--       tokens the worker holds jobs of (a recovering claim leaves those
--       alone)
-- Returns { next, registered, token, deadline, then 5 per job: id, payload,
-- attempt, max_attempts (for a job with headers the string "<max>\n<headers
-- text>", max_of in lib.lua), wait (ms from its enqueue to its first
-- start, when this call's job is in its first attempt: that start is this
-- call's, or for a job recovered or returned again its push's or first
-- run's, first_wait below; -1: a later run or not known) } where the payload of a job this call started
-- is nil when ARGV 10 is 0: the worker reads the payloads with one HMGET
-- of the payload column, so their bytes never pass through Lua (which
-- hashes every byte of a string that enters it, and copies it in and out:
-- most of a claim's Redis CPU with payloads of some KiB). A payload is never changed while its job is active, so that read
-- is as good as this one (a job cancelled and deleted meanwhile: nil).
-- Without payloads a record deleted behind rjq's back is not noticed here:
-- its job starts, the worker finds no payload and leaves it to its lease.
-- With ARGV 10 of 2 or 3 the jobs come in runs instead of five values
-- each: per run of jobs that share attempt, max_attempts and wait (the
-- jobs of one enqueue call, taken in a row, are one run), its number of
-- jobs, those three, then id and payload per job (start_jobs' c.runs,
-- to_runs in lib.lua: two values a job, three a run, where a job had five:
-- the reply's values cost Redis ~0.4k each; src/worker_claim.c reads it).
-- Where next is -1, -2 (paused), or (when fewer
-- than `want` jobs were claimed) the ms until the next delayed job is due, registered
-- the slots registered, token the fencing token of every job returned
-- (ARGV 4) and deadline their lease's end in server time (ms; the worker
-- learns the server's clock from it, and starts no job past it).
-- A claim that filled `want` and left work behind rings the doorbell, so
-- idle workers elsewhere join in (each full claim wakes the next: no herd,
-- no stranded backlog).
local prefix, want, lease, tok, wake = ARGV[1], math.min(tonumber(ARGV[2]), 1000), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local field, epoch, reset, recover = ARGV[6], ARGV[7], ARGV[8] == '1', ARGV[9] == '1'
-- (ARGV 10: '0' ids only, '1' with payloads, each job's five values;
-- '2' ids only, '3' with payloads, in runs: see Returns)
local no_payload, runs = ARGV[10] == '0' or ARGV[10] == '2', ARGV[10] == '2' or ARGV[10] == '3'
local extra = math.max(0, math.min(tonumber(ARGV[11] or '0') or 0, 1000))
local J = columns(cols, prefix)
-- Wrongly typed keys are refused before the first write. The common call
-- (not re-sent, no recovery, not paused, no limits, nothing due) reads
-- prio and the job columns first and takes the ready ids (peek_ready,
-- load_jobs: typed; a refusal after the ids' LPOP puts them back, undoing
-- below) and its next write is ZADD active (start_jobs, typed), so it checks with
-- TYPE only idle and deadlines, when it will write them (a third of a
-- drain's Redis calls were TYPE). Every other path checks all of them at
-- its start (check_all).
local checked = false
local function check_all(read)
  if checked then return end
  checked = true
  -- (read: ready and prio were read already, peek_ready's typed ZCARD and
  -- LPOP, their type checks; J.d is not read without payloads: the group
  -- step's check, two or three TYPE fewer per claim)
  if read then
    expect_types({active, 'zset', idle, 'hash', J.s, 'hash', J.o, 'hash', deadlines, 'zset'})
    if not no_payload then expect_types({J.d, 'hash'}) end
    return
  end
  expect_types({ready, 'list', prio, 'zset', active, 'zset', idle, 'hash', J.d, 'hash', J.s, 'hash',
                J.o, 'hash', deadlines, 'zset'})
end
-- (a read before any write: its type check is the command's own, see typed)
local first = typed('zset', 'ZRANGEBYLEX', held, held_range(tok .. ' ')) -- a re-send's first run
local mv = typed('hash', 'HMGET', meta, 'paused', 'concurrency', 'rate', 'groups')
local paused, conc, rmax, rwin = mv[1], tonumber(mv[2]), limits_rate(mv[3])
if mv[2] and not string.match(mv[2], '^%d+$') then int_fields(meta, 'concurrency') end -- (refused)
if rmax then expect_types({starts, 'zset'}) end -- (before the first write)
-- The waiters' last turn (see "Fair shares"), read before the first write
-- with the hash's type: one that is no turn number is refused here (the
-- fair shares below come after the writes of due jobs and recoveries, and
-- a claim that failed there had started its jobs for nobody).
local last_turn = 0
if conc then
  local v = typed('hash', 'HMGET', waiters, '#')[1]
  if v then
    last_turn = tonumber(string.match(v, '^%d+$'))
    if not last_turn then
      error({err = 'WRONGTYPE field # of ' .. waiters .. ' is not a turn number, rjq expects one'})
    end
  end
end
-- (now as text too: the times this call sends go as text, see now_stamp)
local stamp = now_stamp()
local now = tonumber(stamp)
-- Whether a monitor listens, jobs wait in prio, any job has options and
-- any job is delayed, with one EXISTS (these keys exist while they have
-- members; EXISTS counts a key named twice twice: prio counts 2, options
-- 4, delayed 8): a drain's claim then sends no ZCARD prio (peek_ready),
-- no EXISTS of the options column (load_jobs) and no ZRANGEBYSCORE of
-- delayed (due jobs) when those do not exist. Those that exist are read as
-- before, with their type checks; nothing this call writes before those
-- reads makes options or delayed (due jobs and hand-backs may fill prio:
-- then it is asked again, see prio_known; a recovery reads delayed).
local pre = redis.call('EXISTS', monitored, prio, prio, J.o, J.o, J.o, J.o,
                       delayed, delayed, delayed, delayed, delayed, delayed, delayed, delayed)
local emit = monitor(monitored, events, now, pre % 2 == 1)
local no_prio, no_options, no_delayed = pre % 4 < 2, pre % 8 < 4, pre < 8
local out = {-1, 0, tok, now + lease} -- a number: an integer reply

-- The wait of a job this call returns that it did not start itself (one a
-- recovery takes over, never heard of by its worker, or one a re-sent
-- claim's first run started, whose reply was lost), from its times
-- (state_text's tm), which stay: ms from its enqueue to its start, when
-- that start was its first (attempt a is 1), as the push or claim that
-- started it gave it (start_jobs); else -1. A start after this call's
-- time (times written behind rjq's back) is not known either: -1.
local function first_wait(a, tm)
  if a ~= 1 then return -1 end
  local q, s = times_split(tm)
  q, s = tonumber(q), tonumber(s)
  if not q or not s or s < q or s > now then return -1 end
  return s - q -- (a number: an integer reply)
end

-- The jobs among ids still active under token t, as parallel lists (ids,
-- payloads, attempts, options, lease deadlines, times).
local function still_held(ids, t)
  if #ids == 0 then return ids end
  local s = hmget(J.s, ids)
  -- (format 2: a pushed job's reply channel in its state goes to the
  -- watchers column before its state is written again, recovered or
  -- handed back)
  channels_out(J, ids, s)
  local keep, a, tms = {}, {}, {}
  for i, id in ipairs(ids) do
    local state, n, t2, tm = state_of(s[i])
    if state == 'active' and t2 == t then keep[#keep + 1] = id; a[#keep] = n; tms[#keep] = tm or false end
  end
  if #keep == 0 then return keep end
  return keep, hmget(J.d, keep), a, hmget(J.o, keep), redis.call('ZMSCORE', active, unpack(keep)), tms
end

-- A re-sent claim: what its first run started or recovered (all under its
-- token), nothing more: no second recovery with a known list that is out
-- of date by now (the worker replaces its registration after a reconnect).
if #first > 0 then
  check_all()
  local _, ids = held_split(first[1])
  local keep, d, a, o, dl, tms = still_held(ids, tok)
  -- deadline: the lease's end its first run gave (the worker takes deadline
  -- - lease for the claim's start, see extend.lua). A job's score is no
  -- measure of it: capped by its run time's end (start_jobs), or extended
  -- while the reply was on the way (extend.lua, by token); a job with a
  -- timeout tells it exactly by its deadlines entry (start + timeout), a
  -- job without one by its score.
  local ends, by_end, by_score = zmscore_sparse(deadlines, keep), nil, nil
  for i, id in ipairs(keep) do
    out[#out + 1] = id; out[#out + 1] = d[i]; out[#out + 1] = a[i]
    local _, _m, _b, tmo = parse_options(o[i])
    -- (its wait: the first run's, whose reply the worker never read)
    out[#out + 1] = max_of(o[i]); out[#out + 1] = first_wait(a[i], tms[i] or nil)
    if tmo and ends[i] then
      local t = tonumber(ends[i]) - tmo + lease
      if not by_end or t > by_end then by_end = t end
    else
      local t = tonumber(dl[i]) -- (none: a score removed behind rjq's back)
      if t and (not by_score or t > by_score) then by_score = t end
    end
  end
  out[4] = by_end or by_score or out[4] -- (a number: an integer reply)
  -- (a recovering claim's member is the worker's to forget, whatever came back)
  if #keep == 0 and not recover then redis.call('ZREM', held, first[1]) end
  return runs and to_runs(out) or out
end

-- Recovery: the jobs still held under the worker's tokens it does not know
-- of go under this claim's token with a fresh lease, while `want` allows
-- (their attempt unchanged: they never ran), the rest back to the queue
-- (attempt undone); their old members go. A re-send then finds them with
-- the claimed ones (above).
if recover or paused or conc or rmax then check_all() end
local rec
if recover then
  rec = {}
  local known = {[tok] = true}
  for i = 12, #ARGV do known[ARGV[i]] = true end
  local st, za, deadline = {}, {}, int(now + lease)
  local mine, seen = string.match(tok, '^[^.]+%.[^.]+%.'), {}
  -- the worker's claims (and an older client's pushes) by their held
  -- members, then its pushes (no member) by a scan of active
  local groups = {}
  for _, m in ipairs(held_members(held, mine)) do
    local t, ids = held_split(m)
    if not known[t] then
      for _, id in ipairs(ids) do seen[id] = true end
      groups[#groups + 1] = {t, ids, m}
    end
  end
  -- (a pushed job past its run time's end is left to the sweep, as an
  -- extension leaves it: its completion was refused as lease lost, and
  -- the worker forgot its token, as it forgets a claim's member)
  local toks, by = active_under(active, J, mine, known, seen)
  for _, t in ipairs(toks) do
    local ids, ends, keep = by[t], zmscore_sparse(deadlines, by[t]), {}
    for i, id in ipairs(ids) do
      if not (ends[i] and tonumber(ends[i]) <= now) then keep[#keep + 1] = id end
    end
    if #keep > 0 then groups[#groups + 1] = {t, keep} end
  end
  for _, g in ipairs(groups) do
    local t, ids, m = g[1], g[2], g[3]
    do
      local keep, d, a, o, _, tms = still_held(ids, t)
      local ends = zmscore_sparse(deadlines, keep) -- (their run time's end stays)
      for i, id in ipairs(keep) do
        if want > 0 then
          want = want - 1
          rec[#rec + 1] = id
          out[#out + 1] = id; out[#out + 1] = d[i]; out[#out + 1] = a[i]
          -- (its times stay: the start is that of the push it never ran, and
          -- so does its wait: the worker counts it once, here)
          out[#out + 1] = max_of(o[i]); out[#out + 1] = first_wait(a[i], tms[i] or nil)
          st[#st + 1] = id; st[#st + 1] = state_value('active', a[i], tok, tms[i] or nil)
          za[#za + 1] = deadline; za[#za + 1] = id
          if ends[i] and tonumber(ends[i]) < now + lease and select(4, parse_options(o[i])) then
            za[#za - 1] = ends[i]
          end
        else
          hand_back(J, active, ready, prio, stats, wake, id, a[i], o[i], emit, tms[i] or nil)
        end
      end
      if m then redis.call('ZREM', held, m) end
    end
  end
  if #st > 0 then
    redis.call('HSET', J.s, unpack(st))
    redis.call('ZADD', active, unpack(za))
  end
end

if paused then
  if rec then
    start_jobs(J, {active = active, held = held, emit = emit, tok = tok, deadline = 0, also = rec}, {}, nil, nil,
               nil, out)
  end
  if reset then offer_slots(idle, field, epoch, lease, 0, true) end
  out[1] = -2
  return runs and to_runs(out) or out
end

-- Due delayed jobs (and retries) become ready first. (Reading them checks
-- the delayed set's type: nothing is written yet.)
local due = (no_delayed and not rec) and {} or
            typed('zset', 'ZRANGEBYSCORE', delayed, '-inf', stamp, 'LIMIT', '0', '1000')
if #due > 0 then
  check_all()
  -- a due priority job takes a sequence number (its counters checked
  -- before the ZREM: a refused HINCRBY after it lost the due jobs)
  int_fields(stats, 'seq', 'skipped')
  redis.call('ZREM', delayed, unpack(due))
  local o, s = redis.call('HMGET', J.o, unpack(due)), redis.call('HMGET', J.s, unpack(due))
  local st, plain = {}, {}
  for i, id in ipairs(due) do
    local _, a, _t, tm = state_of(s[i])
    st[#st + 1] = id; st[#st + 1] = state_value('ready', num(a), nil, tm)
    local p = parse_options(o[i])
    if p == 0 then plain[#plain + 1] = id
    else redis.call('ZADD', prio, prio_score(p, next_seq(stats, prio)), id) end
  end
  redis.call('HSET', J.s, unpack(st))
  if #plain > 0 then rpush_all(ready, plain) end
end

-- Limits: the room they leave (and when the rate lets the next start in).
local room, freed = want, nil
local fair = nil -- (fair: this claim's place among the waiters)
if conc then
  local n = redis.call('ZCARD', active) - (redis.call('ZSCORE', active, ACTIVE_PIN) and 1 or 0)
  local free = math.max(conc - n, 0)
  room = math.min(room, free)
  if want > 0 and
     (typed('list', 'LLEN', ready) > 0 or typed('zset', 'ZCARD', prio) > 0) then
    -- the waiters ahead of this worker, in turn order, while they are owed
    -- one of the free slots each (see the top)
    local all, list, mine = typed('hash', 'HGETALL', waiters), {}, nil
    fair = {owed = {}, drop = {}, wake = nil, last = last_turn}
    for i = 1, #all, 2 do
      if all[i] ~= '#' then -- ('#': the last turn, read above)
        local t, noticed = string.match(all[i + 1], '^(%d+) (%d+)$')
        if not t then fair.drop[#fair.drop + 1] = all[i] -- (not rjq's: out)
        elseif all[i] == field then mine = tonumber(t)
        else list[#list + 1] = {all[i], tonumber(t), tonumber(noticed)} end
      end
    end
    table.sort(list, function(a, b) return a[2] < b[2] end)
    for _, w in ipairs(list) do
      if (mine and w[2] > mine) or #fair.owed >= free then break end
      local ch = string.match(w[1], '^%S+ (.+)$')
      if not ch or (w[3] > 0 and now - w[3] > WAIT_GRACE_MS) or
         numsub(ch) == 0 then
        fair.drop[#fair.drop + 1] = w[1]
      else
        fair.owed[#fair.owed + 1] = w
        -- (when its grace ends: it is noticed now when it was not yet)
        local left = w[3] > 0 and w[3] + WAIT_GRACE_MS - now or WAIT_GRACE_MS
        if not fair.wake or left < fair.wake then fair.wake = left end
      end
    end
    fair.mine = mine
    fair.held = free - #fair.owed < want -- (held back by the limit)
    room = math.max(math.min(room, free - #fair.owed), 0)
  elseif want == 0 then
    typed('hash', 'HDEL', waiters, field) -- a stopping worker's last claim
  end
end
if rmax then
  redis.call('ZREMRANGEBYSCORE', starts, '-inf', now - rwin)
  local used = redis.call('ZCARD', starts)
  if rmax - used < room then
    room = math.max(rmax - used, 0)
    -- the next start comes in once the window holds one less than rmax
    -- starts (with this claim's): when its oldest entry beyond that leaves
    local k = math.max(used - rmax, 0)
    local e = redis.call('ZRANGE', starts, k, k, 'WITHSCORES')
    freed = e[2] and tonumber(e[2]) + rwin - now or 0
  end
end

-- (prio_known: prio was absent at the call's start and nothing since
-- can have filled it: no due job, no recovery)
local prio_known = no_prio and #due == 0 and not rec
local ids, nhi, nplain, np = peek_ready(ready, prio, room, prio_known and 0 or nil)
-- The ready ids are taken already (each enters Lua once): what refuses
-- the call before its next write (a key's type: check_all, load_jobs,
-- start_jobs' before_write and ZADD active) runs through undoing, which
-- puts them back at the head of ready, in their order, and refuses it.
local function refused_or(ok, ...)
  if not ok then reready(ready, ids, nhi, nplain); error((...), 0) end
  return ...
end
local function undoing(f)
  if nplain == 0 then return f() end
  return refused_or(pcall(f))
end
-- Job groups (README "Groups", groups_lib.lua): on a queue that has had
-- group jobs (meta field 'groups'), the room the ready jobs leave goes to
-- the groups, round-robin; gids start with them (after them in the reply).
-- (their states are read with the jobs' records, load_jobs: those still
-- ready start, GROUPS.started)
local gids, gmore, gst = nil, false, nil
if mv[4] and #ids < room then
  gids, gmore, gst = undoing(function()
    check_all(true) -- (#ids < room: peek_ready read prio and ready)
    return GROUPS.take(groups, J, room - #ids, now, stats, mv[4] == '2', tok, true)
  end)
end
local all = ids
if gids and #gids > 0 then
  all = {}
  for i = 1, #ids do all[i] = ids[i] end
  for i = 1, #gids do all[#all + 1] = gids[i] end
end
-- A claim that filled `want` and left work behind rings the doorbell
-- (below); that read comes before the first write, where it also checks
-- ready when prio alone filled the claim.
local more = want > 0 and #ids == want and
             (typed('list', 'LLEN', ready) > 0 or np > #ids - nplain)
-- (groups left in the ring: a full claim, or one that stopped after its
-- rounds of visits, wakes the workers to claim again)
if gids and gmore then more = true end
local got = 0
if #all > 0 then
  local d, o, s = undoing(function() return load_jobs(J, all, no_payload, no_options) end)
  if gst then
    local gout, ok, gm
    gout, ok, gm = undoing(function() return GROUPS.started(gst, s, #ids) end)
    if gm then more = true end
    if #gout < #gids then -- (ids left behind by a cancel: not started)
      local na, nd, no, ns = {}, d and {} or nil, {}, {}
      for i = 1, #all do
        if i <= #ids or ok[i - #ids] then
          local k = #na + 1
          na[k], no[k], ns[k] = all[i], o[i], s[i]
          if d then nd[k] = d[i] end
        end
      end
      all, d, o, s = na, nd, no, ns
    end
  end
  -- idle is written when the claim comes back short (fewer jobs start
  -- than it wants: a record missing or an id twice makes it short too) or
  -- resets, deadlines for jobs with a timeout
  local function before_write(n, timeouts)
    if checked then return end
    if n < want or reset then expect_types({idle, 'hash'}) end
    if timeouts then expect_types({deadlines, 'zset'}) end
  end
  -- (in runs at once unless a recovery put its jobs' five values first)
  local sc = {active = active, held = held, deadlines = deadlines, emit = emit, now = now, tok = tok,
              stamp = stamp, deadline = int(now + lease), also = rec, before_write = before_write,
              runs = runs and not rec}
  got = undoing(function() return start_jobs(J, sc, all, d, o, s, out) end)
  unready(ready, prio, ids, nhi, nplain)
  if rmax and got > 0 then
    -- one entry per start (its token and id: unique), at this call's time;
    -- the jobs a recovery took over (first in out) started before
    local za, t, hi = {}, stamp, sc.hi
    for i = (rec and #rec or 0) + 1, #hi do
      za[#za + 1] = t; za[#za + 1] = tok .. ' ' .. hi[i]
    end
    call_all('ZADD', starts, za, 2)
  end
else
  check_all() -- (nothing to claim: the idle path, where a TYPE or eight cost little)
  if rec then -- the member alone
    start_jobs(J, {active = active, held = held, emit = emit, tok = tok, deadline = 0, also = rec}, ids, nil, nil,
               nil, out)
  end
end
if more then redis.call(PUB or pub_mode(), wake, '1') end
if fair then
  -- the waiters' hash (see the top): who is gone, who is noticed, and this
  -- worker's place (a new turn at the back once served)
  if #fair.drop > 0 then redis.call('HDEL', waiters, unpack(fair.drop)) end
  local ring = false
  for _, w in ipairs(fair.owed) do
    if w[3] == 0 then
      redis.call('HSET', waiters, w[1], int(w[2]) .. ' ' .. stamp)
      ring = true
    end
  end
  if fair.held then
    local t = fair.mine
    if got > 0 or not t then
      t = fair.last + 1
      redis.call('HSET', waiters, '#', int(t))
    end
    redis.call('HSET', waiters, field, int(t) .. ' 0')
  elseif fair.mine then
    redis.call('HDEL', waiters, field)
  end
  if ring and not more then redis.call(PUB or pub_mode(), wake, '1') end
end
if got < want then
  if conc or rmax then
    if reset then offer_slots(idle, field, epoch, lease, 0, true) end
  else
    out[2] = offer_slots(idle, field, epoch, lease, want - got + extra, reset)
  end
  local nx = redis.call('ZRANGE', delayed, '0', '0', 'WITHSCORES')
  if nx[2] then out[1] = math.max(0, tonumber(nx[2]) - now) end
  local gnx = gids and GROUPS.next_due(groups, now) -- (the groups' delayed jobs)
  if gnx and (out[1] < 0 or gnx < out[1]) then out[1] = gnx end
  if freed and (out[1] < 0 or freed < out[1]) then out[1] = math.max(freed, 0) end
  -- held back behind a waiter that was noticed: back when its grace ends
  local back = fair and fair.held and fair.wake
  if back and (out[1] < 0 or back < out[1]) then out[1] = math.max(back, 0) + 1 end
elseif reset then
  offer_slots(idle, field, epoch, lease, 0, true)
end
if runs and rec then return to_runs(out) end -- (see sc above)
return out
