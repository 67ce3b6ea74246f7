-- enqueue: write job records and make them ready or delayed, atomically;
-- jobs made ready go straight to idle workers that registered free slots
-- (push_to_idle in lib.lua), else the doorbell rings.
-- KEYS (src/keys.def; bound to these locals): ready, prio, delayed, stats,
--       active, idle, cols, monitored, events, deadlines, dedup,
--       reserved, meta, groups (read for the bound only)
-- ARGV: 1 job name prefix, 2 wake channel, 3 reply channel of an awaiting
--       producer ('' for none), 4 token base for pushed jobs (unique per
--       call), 5 max waiting jobs (0: no bound), 6 jobs without an id in
--       the calls after this one, 7 '' or "<i> <k> <mark>", 8 K, 9..8+K
--       the caller ids of the jobs in the calls after this one (see "One
--       batch, several calls" below), then per job: id ('' =
--       assign the next number), payload, options ('' = defaults, else
--       "delay_ms,priority,max_attempts,backoff[;timeout_ms[;dedup_ms[;1]]]",
--       the last 1 for debounce), with a leading '+' when the job belongs
--       to the same unit of admission as the one before it (see below);
--       last, the declared index fields as the producer learnt them ('':
--       none; see "Index" below).
-- Returns { id1, existed1, id2, existed2, ... } in request order; an
-- existing id is reported (existed = 1) and not touched, as is one still
-- reserved in the dedup set (its record is gone: lib.lua). With debounce,
-- an existing job that waits (ready or delayed, not running) gets the new
-- payload, and its due time is pushed back to now + delay: existed = 2.
-- A bounded queue (ARGV 5 > 0) admits the call's units one after the
-- other, in order: a unit is a job and the jobs that follow it with a
-- '+' (enqueue.c: one rjq_enqueue_batch() is one unit, each rjq_enqueue()
-- is a unit of its own, though a loop turn's enqueues share a call). A
-- unit whose new jobs would make more than ARGV 5 jobs wait, counting
-- those of the units admitted before it, is refused whole and nothing of
-- it is written: each of its jobs is reported as { "RJQFULL ...", -1 }.
-- A batch of several calls (below) is one unit: refused whole, with the
-- error "RJQFULL ..." before any write.
-- One batch, several calls: a batch too big for one call (enqueue.c: more
-- than 1 MiB of arguments) comes as k calls in one transaction (MULTI ..
-- EXEC: nothing runs between them). Call i of k gets ARGV 7 "<i> <k>
-- <mark>". The first call checks the bound for the whole batch: ARGV 6
-- and 8.. describe the later calls' jobs (how many have no id; the ids of
-- the others, which count as new unless they exist, as a single call's
-- would), and when it refuses the batch it records its error in stats
-- under "refused <mark>": each later call finds that first, refuses too,
-- and the last removes it. Every call checks the type of every key any of
-- them may write, before anything else, so they fail alike: the batch
-- lands whole or not at all.
-- Payloads ahead: a batch of anonymous jobs of priority 0 comes as one
-- transaction (enqueue.c): this script with ARGV 7 "C <member> <first>
-- <count>" (the check), an HSETNX of each job's payload into the payload
-- column under a number of the range <member> that reserve.lua set aside
-- (KEYS 18, reserved; the batch's numbers are first..first+count-1), then
-- this script with ARGV 7 "R <member> <drop>", those numbers as the jobs'
-- ids and empty payload arguments: the payload bytes never pass through
-- Lua. While the range is recorded its numbers are the producer's alone.
-- A server that lost it (flushed, restored from before it) may have given
-- them to other jobs (or another producer may have reserved them again):
-- the check then notes (in stats, field "ahead": nobody else sees it, the
-- last call removes it) which of the numbers have a payload already, and
-- the last call deletes the payloads of the others
-- (those its HSETNX wrote) and refuses the batch with "RJQSTALE ..." (the
-- producer sends it again the usual way). Every refusal of such a batch
-- deletes the payloads it wrote: nothing of it stays. <drop>: the records
-- of ranges the producer left with numbers unused, comma-separated ('-':
-- none), dropped when the batch lands.
-- Index: on a queue with declared JSON fields (index.lua) the producer
-- passes the fields it learnt (src/enqueue.c): then, and only then, this
-- call reads the declaration (meta field "index", the truth: the fields
-- passed only say that there may be one) and indexes its new jobs (and
-- the new payload of a debounced one) with lib.lua index_jobs. A call
-- with '' costs nothing more; its jobs are not indexed, which the index's
-- coverage shows (index.lua: a search by the index falls back to the scan
-- while the index does not cover every job).
-- Made ids: the library's ids for anonymous jobs of a sharded queue
-- (docs/sharding.md 6a) come with a first byte no caller id has, taken off
-- here: ' ', unique by construction, so in a call of its own the job is new
-- without a look-up (the anonymous path's cost); '\t' (or in a batch of
-- several calls) looked up as any caller id: the call was sent again after
-- a lost connection and may have run (src/enqueue.c, "Made ids").
-- unmark_made_id takes the mark off ARGV[i], an id; a ' ' id is recorded
-- in new (when given): written without a look-up. The call's own ids are
-- unmarked in the options' pass below, later calls' ids before it.
local function unmark_made_id(i, new)
  local b = string.byte(ARGV[i], 1)
  if b == 32 or b == 9 then
    ARGV[i] = string.sub(ARGV[i], 2)
    if b == 32 and new then new[ARGV[i]] = true end
  end
end

local wrote = false -- the call wrote (beyond the payloads written ahead)
local refused = {} -- job index -> why its unit was refused (a bounded queue)

-- Delete the payloads of job numbers these (never an error).
local function unwrite(these)
  for i = 1, #these, CHUNK do
    redis.pcall('HDEL', cols[1], unpack(these, i, math.min(i + CHUNK - 1, #these)))
  end
end

-- The check of a batch with payloads ahead (see above), before its HSETNX.
local cmember, cfirst, ccount = string.match(ARGV[7], '^C (%S+) (%d+) (%d+)$')
if cmember then
  local first, last = tonumber(cfirst), tonumber(cfirst) + tonumber(ccount) - 1
  if type(redis.pcall('ZSCORE', reserved, cmember)) == 'string' then
    -- The numbers are this producer's alone, and none has a job: a payload
    -- there is a stray of a try whose scripts did not run (the HSETNX of a
    -- transaction run while the library was missing): out, so that the
    -- HSETNX writes this batch's.
    local these = {}
    for x = first, last do these[#these + 1] = int(x) end
    unwrite(these)
    return 1
  end
  local payload, had = cols[1], {'-'} -- ('-': the note is there)
  for x = first, last do
    local id = int(x)
    if redis.pcall('HEXISTS', payload, id) == 1 then had[#had + 1] = id end
  end
  redis.pcall('HSET', stats, 'ahead', table.concat(had, ' '))
  return 0
end

local function main(reserved)
local prefix, wake, ch, tbase = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local max_waiting, later = tonumber(ARGV[5]), tonumber(ARGV[6])
local part, parts, mark = string.match(ARGV[7], '^(%d+) (%d+) (%S+)$')
local LATER = 9 -- ARGV index of the first id of a later call's job
local FIRST = LATER + tonumber(ARGV[8]) -- of the first job
local J = columns(cols, prefix)

-- A call of a batch that an earlier call refused refuses too.
if mark then
  mark = 'refused ' .. mark
  local why = typed('hash', 'HMGET', stats, mark)[1]
  if why then
    if part == parts then redis.call('HDEL', stats, mark) end
    return redis.error_reply(why)
  end
end
local n = (#ARGV - FIRST) / 3
local made = {} -- the call's made ids written without a look-up (a call of its own)
local made_new = not mark and not reserved and made or nil
for i = LATER, FIRST - 1 do unmark_made_id(i) end
local ifields = ARGV[#ARGV] ~= '' and index_fields(meta) or nil
local ix_ids, ix_p = {}, {} -- the jobs to index and their payloads

-- Options first (no writes yet): delay, priority and the options column
-- value (false: defaults) of each job, so the type checks below cover
-- exactly the keys this call may write.
local delay, pri, stored = {}, {}, {}
local any_delay, any_opts, any_prio, any_timeout, any_debounce = false, false, false, false, false
local deb, joins = {}, {}
-- (the jobs of a batch mostly share their options text, e.g. a bridge's
-- rows: each text is read once, its first job's reading serves the others)
local first_with = {}
for i = 1, n do
  unmark_made_id(FIRST + 3 * i - 3, made_new)
  local o = ARGV[FIRST + 3 * i - 1]
  local f = first_with[o]
  if f then
    joins[i], deb[i], delay[i], pri[i], stored[i] = joins[f], deb[f], delay[f], pri[f], stored[f]
  else
    first_with[o] = i
    if string.byte(o, 1) == 43 then joins[i] = true; o = string.sub(o, 2) end -- '+'
    delay[i], pri[i], stored[i] = 0, 0, false
    if o ~= '' then
      local timeout, debounce
      delay[i], pri[i], stored[i], timeout, debounce = job_options(o)
      if not delay[i] then return redis.error_reply('ERR rjq enqueue: bad job options') end
      if debounce then deb[i] = true; any_debounce = true end
      if timeout then any_timeout = true end
      if stored[i] then any_opts = true end
      if delay[i] > 0 then any_delay = true elseif pri[i] ~= 0 then any_prio = true end
      if reserved and (pri[i] ~= 0 or deb[i]) then
        return redis.error_reply('ERR rjq enqueue: a job with payload ahead has a priority')
      end
    end
  end
end

-- Refuse wrongly typed keys before the first write: the reads below check
-- theirs; keys this call only writes get a TYPE each, but for the usual
-- call (new anonymous jobs, ready at once, of priority 0, one call): the
-- counter stats seq is its first write, the job columns come next and
-- check their own types, each undone if one is refused (undoable in
-- lib.lua), so their TYPEs are spared.
local own = not reserved and not mark and not any_delay and not any_prio and not any_debounce
if own then
  for i = FIRST, #ARGV - 1, 3 do
    if ARGV[i] ~= '' and not made[ARGV[i]] then own = false; break end
  end
end
local idle_pick = typed('hash', 'HRANDFIELD', idle, 1, 'WITHVALUES')
-- Whether jobs wait and a monitor listens, with one EXISTS (lib.lua)
local nothing_ready, monitored_on = ready_and_monitored(ready, prio, monitored)
local spec = {}
-- the job columns (J.s: every new job's state, its enqueue time)
local col_spec = {J.d, 'hash', J.s, 'hash'}
if ch ~= '' then col_spec[#col_spec + 1] = J.n; col_spec[#col_spec + 1] = 'hash' end
if any_opts then col_spec[#col_spec + 1] = J.o; col_spec[#col_spec + 1] = 'hash' end
if not own then spec = col_spec end
if any_delay then spec[#spec + 1] = delayed; spec[#spec + 1] = 'zset' end
if any_debounce then
  spec[#spec + 1] = delayed; spec[#spec + 1] = 'zset'
  spec[#spec + 1] = J.o; spec[#spec + 1] = 'hash'
end
-- active: written by a push. The usual call (own) leaves it to the push's
-- lease, its ZADD through u right after the columns (job_maker), or checks
-- it with the columns when those lose their undo (col_spec).
local active_unchecked = own and #idle_pick > 0
if #idle_pick > 0 then
  if own then
    col_spec[#col_spec + 1] = active; col_spec[#col_spec + 1] = 'zset'
  else
    spec[#spec + 1] = active; spec[#spec + 1] = 'zset'
  end
  -- (jobs with a timeout enter deadlines when pushed; those already ready
  -- may have one too)
  if any_timeout or not nothing_ready then spec[#spec + 1] = deadlines; spec[#spec + 1] = 'zset' end
end
if reserved then spec[#spec + 1] = stats; spec[#spec + 1] = 'hash' end
if mark then -- one of several calls: every key any of them may write
  spec = {J.d, 'hash', J.n, 'hash', J.o, 'hash', J.s, 'hash', delayed, 'zset', active, 'zset',
          deadlines, 'zset', dedup, 'zset', stats, 'hash'}
end
if ifields then spec[#spec + 1] = J.x; spec[#spec + 1] = 'hash'; spec[#spec + 1] = J.i; spec[#spec + 1] = 'zset' end
expect_types(spec)

-- Ids given by the caller that exist already (or twice in this batch);
-- with those of later calls' jobs, for the bound (see above).
local given = {}
for i = FIRST, #ARGV - 1, 3 do
  if ARGV[i] ~= '' and not reserved and not made[ARGV[i]] then given[#given + 1] = ARGV[i] end
end
for i = LATER, FIRST - 1 do given[#given + 1] = ARGV[i] end
local taken, recorded = {}, {}
if #given > 0 then
  local v = hmget(J.d, given)
  local fresh = {}
  for i, id in ipairs(given) do
    if v[i] then taken[id] = true; recorded[id] = true else fresh[#fresh + 1] = id end
  end
  -- ids still reserved after their record went (dedup, see lib.lua)
  local until_ = zmscore_sparse(dedup, fresh)
  local t_now
  for i, id in ipairs(fresh) do
    if until_[i] then
      t_now = t_now or now_ms()
      if tonumber(until_[i]) > t_now then taken[id] = true end
    end
  end
end

-- A bounded queue: the jobs a unit adds (new ids, each once) must fit
-- (a batch's first call checks all of it, as one unit).
local admitted = {} -- the indexes of the jobs admitted, in order
for i = 1, n do admitted[i] = i end
if max_waiting > 0 and (not part or part == '1') then
  -- (its groups' jobs wait too: GROUPS.waiting, groups_lib.lua)
  local waiting = typed('list', 'LLEN', ready) + typed('zset', 'ZCARD', prio) +
                  typed('zset', 'ZCARD', delayed) + GROUPS.waiting(groups, stats)
  local function over(adds)
    return string.format('RJQFULL the queue has %d waiting jobs; %d more '
      .. 'would pass max_waiting %d', waiting, adds, max_waiting)
  end
  local seen = {}
  if mark then
    local adds = later
    local function count(id)
      if id == '' then adds = adds + 1
      elseif not taken[id] and not seen[id] then adds = adds + 1; seen[id] = true end
    end
    for i = FIRST, #ARGV - 1, 3 do count(ARGV[i]) end
    for i = LATER, FIRST - 1 do count(ARGV[i]) end
    if adds > 0 and waiting + adds > max_waiting then
      local why = over(adds)
      if part ~= parts then typed('hash', 'HSET', stats, mark, why) end
      return redis.error_reply(why)
    end
  else
    admitted = {}
    local i = 1
    while i <= n do
      local j, adds, mine = i, 0, {}
      while j < n and joins[j + 1] do j = j + 1 end
      for k = i, j do
        local id = ARGV[FIRST + 3 * k - 3]
        if id == '' or reserved then adds = adds + 1
        elseif not taken[id] and not seen[id] and not mine[id] then
          adds = adds + 1; mine[id] = true
        end
      end
      if adds > 0 and waiting + adds > max_waiting then
        local why = over(adds)
        for k = i, j do refused[k] = why end
      else
        waiting = waiting + adds
        for id in pairs(mine) do seen[id] = true end
        for k = i, j do admitted[#admitted + 1] = k end
      end
      i = j + 1
    end
  end
end
local out = {}
for i in pairs(refused) do out[2 * i - 1] = refused[i]; out[2 * i] = -1 end
if #admitted == 0 then return out end
n = #admitted -- (the jobs written: the loop below goes through these)

-- (counted below when ids exist or numbers were taken ahead: checked
-- before the first write)
if reserved or #given > 0 then int_fields(stats, 'skipped') end
wrote = true
local seq, window = 0, false
local u = own and undoable() -- (the columns' writes: see the type checks above)
if reserved then -- numbers taken already: used now, no longer skipped
  redis.call('HINCRBY', stats, 'skipped', -n)
elseif u then
  seq = u.call('hash', function(r)
    if r == n then return function() redis.call('HDEL', stats, 'seq') end end
    return function() redis.call('HINCRBY', stats, 'seq', -n) end
  end, 'HINCRBY', stats, 'seq', n) - n -- the first write
  window = rank_window_in(seq + 1, seq + n)
  if window then u.check(col_spec); u = nil; active_unchecked = false end -- (renumber_prio writes first)
else
  seq = typed('hash', 'HINCRBY', stats, 'seq', n) - n -- the first write
  window = rank_window_in(seq + 1, seq + n) -- see "Order within a priority"
end
local ring = false
local emit = monitor(monitored, events, nil, monitored_on)
local make = job_maker(J, ready, prio, delayed, wake, emit, nothing_ready) -- (lib.lua)
local added = 0

for a = 1, n do
  local i = admitted[a]
  local id, payload = ARGV[FIRST + 3 * i - 3], ARGV[FIRST + 3 * i - 2]
  seq = seq + 1
  if seq == window then renumber_prio(prio) end
  if id == '' then id = int(seq) end
  local existed = 0
  if taken[id] then
    existed = 1
    if deb[i] and recorded[id] then
      -- debounce: a job still waiting takes the new payload and waits again
      local state, attempts, _, tm = state_text(redis.call('HMGET', J.s, id)[1])
      if state == 'ready' or state == 'delayed' then
        -- out of where it waits (by the priority it waits under), then in
        -- again with the options it has now, due delay from now
        local was = redis.call('HMGET', J.o, id)[1]
        unqueue(ready, prio, delayed, id, state, was)
        local p = parse_options(was)
        if stored[i] then redis.call('HSET', J.o, id, stored[i]); p = pri[i] end
        redis.call('HSET', J.d, id, payload)
        unindex(J, {id}) -- (its entries were of the payload before)
        if ifields then ix_ids[#ix_ids + 1] = id; ix_p[#ix_p + 1] = payload end
        if delay[i] > 0 then
          redis.call('HSET', J.s, id, state_value('delayed', attempts, nil, tm))
          if push_delayed(delayed, id, make.at() + delay[i]) then ring = true end
        else
          redis.call('HSET', J.s, id, state_value('ready', attempts, nil, tm))
          push_ready(ready, prio, stats, wake, id, p, false)
        end
        existed = 2
      end
    end
  else
    taken[id] = true
    added = added + 1
    make.add(id, not reserved and payload or nil, stored[i], delay[i], pri[i], seq,
             ch ~= '' and ch or nil)
    if ifields and not reserved then ix_ids[#ix_ids + 1] = id; ix_p[#ix_p + 1] = payload end
  end
  out[2 * i - 1] = id
  out[2 * i] = existed
end

-- enqueued is seq - skipped (lib.lua): only ids that existed need counting
if added < n then redis.call('HINCRBY', stats, 'skipped', n - added) end
-- (Nothing was waiting: new jobs go straight to idle workers, job_maker.
-- Jobs whose payloads were written ahead go through ready: from_ready
-- reads them back for the workers it pushes to.)
make.finish({active = active, idle = idle, deadlines = deadlines, tbase = tbase,
             pick = idle_pick, direct = not any_prio and not reserved,
             unchecked = active_unchecked}, ring, u)
if #ix_ids > 0 then index_jobs(J, ifields, ix_ids, ix_p) end
return out
end

local member, rlo, rhi, drop = string.match(ARGV[7], '^R ((%d+)%-(%d+)%-%w+) (%S+)$')
if not member then
  if string.sub(ARGV[7], 1, 2) == 'R ' then return redis.error_reply('ERR rjq enqueue: bad reservation') end
  return main(false)
end

-- Payloads ahead (see above).
local ids, lo, hi = {}, tonumber(rlo), tonumber(rhi)
local rec = redis.pcall('ZSCORE', reserved, member)
local valid = type(rec) == 'string'
for i = 9 + tonumber(ARGV[8]), #ARGV - 1, 3 do
  local x = tonumber(ARGV[i])
  if not x or x < lo or x > hi then valid = false end
  ids[#ids + 1] = ARGV[i]
end
if not valid then
  -- the payloads the HSETNX wrote: of the numbers the check found without
  -- one (or, without its note, those above seq: never given to a job)
  local noted = redis.pcall('HMGET', stats, 'ahead')
  redis.pcall('HDEL', stats, 'ahead')
  local mine = {}
  if type(noted) == 'table' and not noted.err and noted[1] then
    local had = {}
    for id in string.gmatch(noted[1], '%S+') do had[id] = true end
    for _, id in ipairs(ids) do
      if not had[id] then mine[#mine + 1] = id end
    end
  else
    local c = redis.pcall('HMGET', stats, 'seq')
    local seq = (type(c) == 'table' and not c.err) and tonumber(c[1] or '0') or math.huge
    for _, id in ipairs(ids) do
      local x = tonumber(id)
      if x and x > seq then mine[#mine + 1] = id end
    end
  end
  unwrite(mine)
  if type(rec) == 'table' and rec.err then return rec end
  return redis.error_reply('RJQSTALE job numbers ' .. member ..
                           ' reserved for payloads ahead are not recorded (the server lost them)')
end
local ok, res = pcall(main, true)
if ok then
  if type(res) == 'table' and res.err then
    unwrite(ids) -- refused: nothing of it stays
  else
    local gone = {} -- the payloads of the jobs of units refused
    for i in pairs(refused) do gone[#gone + 1] = ids[i] end
    unwrite(gone)
    if tonumber(ids[#ids]) == hi then redis.call('ZREM', reserved, member) end
    for d in string.gmatch(drop, '[^,]+') do
      if d ~= '-' then redis.call('ZREM', reserved, d) end
    end
  end
  return res
end
if not wrote then unwrite(ids) end
return reraise(res)
