-- genqueue: enqueue jobs of groups (README "Groups"; groups_lib.lua), the
-- jobs of one loop turn in one call whatever their groups (src/enqueue.c
-- batches them as it does plain jobs): each job's columns as enqueue.lua
-- writes them, its group in the groups' job hash, and its place in its
-- group's ready list (or prio set), or in the groups' delayed set; a
-- group enters the round-robin ring when it can start work (the doorbell
-- rings when the ring was empty, or when a delayed job became the groups'
-- earliest). The call's ready jobs of one group go in with one RPUSH (and
-- one ZADD of those with a priority), in call order (FIFO within the
-- group), and the group's depth index entry, listing and ring place are
-- written once per call. Push delivery: when a worker registered idle
-- slots (lib.lua offer_slots; none on a paused or limited queue:
-- CONTROL_MARK), the call's ready jobs are pushed to the idle workers
-- (push_to_idle), those the claim would start next (GROUPS.take: the
-- ring's next turns, within their groups' limits; not always the new
-- jobs); on one server a message heard by nobody is undone in the call
-- (its jobs back where the take took them, GROUPS.untake; the stale
-- registration dropped, the doorbell rung); on a cluster PUBSUB
-- SHARDNUMSUB is asked first and nothing is undone (lib.lua
-- push_to_idle). The queue's meta field 'groups' is set, so
-- claims serve the groups from then on.
-- KEYS (src/keys.def; bound to these locals): stats, cols, meta, groups,
--       ready, prio, delayed, active, idle, monitored, events, deadlines
-- ARGV: 1 the queue's max waiting jobs (0: no bound), 2 token base for
--       pushed jobs (unique per call; '': no push), then per job: id (''
--       = assign the next number), payload, options ('' = defaults, else
--       as enqueue.lua takes them, no debounce; with a leading '+' when
--       the job belongs to the same unit of admission as the one before
--       it: one rjq_enqueue_batch() is one unit), group.
-- Returns { id1, existed1, id2, existed2, ... } in request order: an id
-- that exists (or came earlier in the call) is reported (existed = 1) and
-- nothing is written for it. Units are admitted one after the other, in
-- order; a unit refused is refused whole, nothing of it written, each of
-- its jobs reported as { "RJQFULL ...", -1 }: a bounded queue (ARGV 1 >
-- 0) refuses a unit whose new jobs would make more than that many jobs
-- wait (its own ready and delayed ones and its groups', GROUPS.waiting,
-- with those of the units admitted before it); a group with a bound on
-- its ready jobs (gconf max_waiting) refuses a unit with a new job that
-- finds that many ready in its group (counting the ready jobs of the
-- units admitted before it and of its own unit before it). A delayed job
-- is refused the same (its group's ready jobs are counted when it is
-- enqueued, not when it becomes ready).
local max_waiting = tonumber(ARGV[1]) or 0
local tbase = ARGV[2] ~= '' and ARGV[2] or nil
local FIRST = 3
local n = (#ARGV - 2) / 4
if n < 1 or n ~= math.floor(n) then return redis.error_reply('ERR rjq genqueue: bad arguments') end
local J = columns(cols)

-- Each job's options and group first (no writes yet): its group rides as
-- its last header (GROUPS.hinted in groups_lib.lua). (A turn's jobs mostly
-- share their options text, whatever their groups: each text is read
-- once, its stored value then ends with "rjq.group=", the group's name
-- appended per job.)
local ids, gs, joins, delay, pri, stored = {}, {}, {}, {}, {}, {}
local read, glist, gseen = {}, {}, {}
for i = 1, n do
  local at = FIRST + 4 * i - 4
  local o, g = ARGV[at + 2], ARGV[at + 3]
  if not gseen[g] then
    if not GROUPS.named(g) then return redis.error_reply('ERR rjq genqueue: bad group name') end
    gseen[g] = true; glist[#glist + 1] = g
  end
  if string.byte(o, 1) == 43 then joins[i] = true; o = string.sub(o, 2) end -- '+'
  local r = read[o]
  if not r then
    local d, p, s, _, debounce = job_options((o == '' and '0,0,3,' or o) .. '\n' .. GROUPS.HEADER)
    if not d or debounce then return redis.error_reply('ERR rjq genqueue: bad job options') end
    r = {d, p, s}
    read[o] = r
  end
  ids[i], gs[i], delay[i], pri[i], stored[i] = ARGV[at], g, r[1], r[2], r[3] .. g
end
-- The keys' types are checked before the first write (nothing written
-- when one is wrongly typed), each by the first command that reads it
-- where there is one (typed: the read's own WRONGTYPE; stats, meta, the
-- payloads when ids are given, the settings, the depth index, the lists
-- and priority sets of bounded and entering groups, idle), else by a TYPE
-- (expect_types) only of the keys the call writes: the job columns and
-- the groups' job hash on every call; the ring, listing, busy set and
-- delayed set when the call writes them (below, spec).
local seq = int_fields(stats, 'seq', 'skipped', 'gready')[1] or 0
local mgroups = typed('hash', 'HMGET', meta, 'groups')[1]
local spec = {J.s, 'hash', J.o, 'hash', groups .. 'job', 'hash'}

-- ids given that exist already
local given, taken = {}, {}
for i = 1, n do if ids[i] ~= '' then given[#given + 1] = ids[i] end end
if #given > 0 then
  local v = hmget(J.d, given, 'hash')
  for i, id in ipairs(given) do if v[i] then taken[id] = true end end
else
  spec[#spec + 1] = J.d; spec[#spec + 1] = 'hash'
end

-- the groups' settings (the call's cache gc); what a limited or rated
-- group's offer reads: checked only for such a group
local gc, bound, rated_any = {}, {}, false
local lspec = {}
if not GROUPS.noconf(groups, gc) then expect_types({groups .. 'conf', 'hash'}) end
for _, g in ipairs(gc.noconf and {} or glist) do -- (no settings: none has a limit, rate or bound)
  local limit, _, _, rate, _, b = GROUPS.conf(groups, g, gc)
  if limit then lspec[#lspec + 1] = groups .. 'a:' .. g; lspec[#lspec + 1] = 'set' end
  if rate then rated_any = true end
  bound[g] = b
end
if rated_any then lspec[#lspec + 1] = groups .. 'rated'; lspec[#lspec + 1] = 'zset' end
if #lspec > 0 then expect_types(lspec) end

-- Admission, unit by unit (see above).
local out = {}
local waiting = 0
if max_waiting > 0 then
  waiting = typed('list', 'LLEN', ready) + typed('zset', 'ZCARD', prio) +
            typed('zset', 'ZCARD', delayed) + GROUPS.waiting(groups, stats)
end
local gw = {} -- a bounded group -> its ready jobs (with those admitted so far)
local seen = {} -- ids given of the units admitted
local admitted = {}
local i = 1
if max_waiting <= 0 and next(bound) == nil then -- (no bound: every unit admitted)
  for k = 1, n do admitted[k] = k end
  i = n + 1
end
while i <= n do
  local j = i
  while j < n and joins[j + 1] do j = j + 1 end
  local adds, mine, gadd, gwhy = 0, {}, {}, nil
  for k = i, j do
    local id, g = ids[k], gs[k]
    if id == '' or (not taken[id] and not seen[id] and not mine[id]) then
      if id ~= '' then mine[id] = true end
      adds = adds + 1
      local b = bound[g]
      if b and not gwhy then
        if not gw[g] then
          gw[g] = typed('list', 'LLEN', groups .. 'r:' .. g) + typed('zset', 'ZCARD', groups .. 'p:' .. g)
        end
        local w = gw[g] + (gadd[g] or 0)
        if w >= b then
          gwhy = string.format('RJQFULL the group %s has %d waiting jobs; one more '
            .. 'would pass its max_waiting %d', g, w, b)
        end
      end
      if delay[k] == 0 then gadd[g] = (gadd[g] or 0) + 1 end
    end
  end
  local why = gwhy
  if max_waiting > 0 and adds > 0 and waiting + adds > max_waiting then
    why = string.format('RJQFULL the queue has %d waiting jobs; %d more '
      .. 'would pass max_waiting %d', waiting, adds, max_waiting)
  end
  if why then
    for k = i, j do out[2 * k - 1] = why; out[2 * k] = -1 end
  else
    waiting = waiting + adds
    for g, a in pairs(gadd) do if gw[g] then gw[g] = gw[g] + a end end
    for id in pairs(mine) do seen[id] = true end
    for k = i, j do admitted[#admitted + 1] = k end
  end
  i = j + 1
end

-- the jobs written: admitted, new (an id given twice: its first)
local new, wrote, any_ready, any_prio = {}, {}, false, false
for _, k in ipairs(admitted) do
  local id = ids[k]
  if id ~= '' and (taken[id] or wrote[id]) then
    out[2 * k - 1] = id; out[2 * k] = 1
  else
    if id ~= '' then wrote[id] = true end
    new[#new + 1] = k
    if delay[k] == 0 then any_ready = true end
    if pri[k] ~= 0 then any_prio = true end
  end
end
if #new == 0 then return out end

-- an idle worker to push to (read, and the keys a push writes checked,
-- before the first write)
local pick = {}
if tbase and any_ready then
  pick = typed('hash', 'HRANDFIELD', idle, 1, 'WITHVALUES')
  if #pick > 0 and pick[1] ~= CONTROL_MARK then expect_types({active, 'zset', deadlines, 'zset'}) end
end
local now = now_ms()
local qtimes = int(now) .. ',,'
local sready, sdelayed = state_value('ready', '0', nil, qtimes), state_value('delayed', '0', nil, qtimes)
local dcol, ocol, jcol, scol = {}, {}, {}, {}
local byg, gready, later = {}, {}, {} -- group -> its ready jobs {ids of priority 0, prio set's pairs}
local NONE = {} -- (a group's prio pairs until it has one: no table made per group for them)
for _, k in ipairs(new) do
  seq = seq + 1
  local id, g = ids[k], gs[k]
  if id == '' then id = int(seq) end
  out[2 * k - 1] = id; out[2 * k] = 0
  dcol[#dcol + 1] = id; dcol[#dcol + 1] = ARGV[FIRST + 4 * k - 3]
  ocol[#ocol + 1] = id; ocol[#ocol + 1] = stored[k]
  jcol[#jcol + 1] = id; jcol[#jcol + 1] = g
  scol[#scol + 1] = id
  if delay[k] > 0 then
    scol[#scol + 1] = sdelayed
    later[#later + 1] = k
  else
    scol[#scol + 1] = sready
    local b = byg[g]
    if not b then b = {{}, NONE}; byg[g] = b; gready[#gready + 1] = g end
    if pri[k] == 0 then b[1][#b[1] + 1] = id
    else
      if b[2] == NONE then b[2] = {} end
      b[2][#b[2] + 1] = prio_score(pri[k], seq); b[2][#b[2] + 1] = id
    end
  end
end

-- The groups' lists and priority sets: a group that enters the depth
-- index (GROUPS.deepen) is counted from them before the first write
-- (typed: their check); the call's first writes are the groups' ready
-- ids, each write checking its own key's type (lib.lua undoable: one
-- refused undoes those before it, nothing written), not a TYPE of two
-- keys per group.
local u = undoable()
local was, dnow = {}, {} -- (was[k]: gready[k]'s count in the depth index; dnow[g]: an entering group's ready ids, counted)
local entering = false
if #gready > 0 then
  for at = 1, #gready, CHUNK do
    local part = typed('zset', 'ZMSCORE', groups .. 'depth', unpack(gready, at, math.min(at + CHUNK - 1, #gready)))
    for j = 1, #part do was[at + j - 1] = part[j] and -count_of(part[j]) or 0 end
  end
  local ent = {}
  for k, g in ipairs(gready) do
    if was[k] <= 0 then
      dnow[g] = typed('list', 'LLEN', groups .. 'r:' .. g) + typed('zset', 'ZCARD', groups .. 'p:' .. g)
      ent[#ent + 1] = g
    end
  end
  -- the entering groups' places in the ring and its size, read once for
  -- their offers (GROUPS.offer: c.inring, c.ringn; the ring's check)
  if #ent > 0 then
    entering = true
    gc.inring = {}
    for at = 1, #ent, CHUNK do
      local part = typed('zset', 'ZMSCORE', groups .. 'ring', unpack(ent, at, math.min(at + CHUNK - 1, #ent)))
      for j = 1, #part do gc.inring[ent[at + j - 1]] = part[j] and true or false end
    end
    gc.ringn = typed('zset', 'ZCARD', groups .. 'ring')
  end
end
-- what the call writes besides (GROUPS.list, push_delayed, GROUPS.offer,
-- the push's GROUPS.take)
local pushing = #pick > 0
if entering or #later > 0 or pushing then spec[#spec + 1] = groups .. 'all'; spec[#spec + 1] = 'zset' end
if not entering and (pushing or not gc.noconf) then spec[#spec + 1] = groups .. 'ring'; spec[#spec + 1] = 'zset' end
if entering or pushing then spec[#spec + 1] = groups .. 'busy'; spec[#spec + 1] = 'zset' end
if #later > 0 or pushing then spec[#spec + 1] = groups .. 'delayed'; spec[#spec + 1] = 'zset' end
expect_types(spec)
if #gready > 0 then
  -- (the pushes' undo: one step for them all, not a closure per group)
  local pushed = {} -- list key, its ids pushed, ...
  u.step(function() -- (from the tail: LREM, which the worker's ACL has, not RPOP)
    for x = #pushed - 1, 1, -2 do
      local rk, part = pushed[x], pushed[x + 1]
      for j = #part, 1, -1 do redis.call('LREM', rk, -1, part[j]) end
    end
  end)
  for _, g in ipairs(gready) do
    local b = byg[g]
    for part_at = 1, #b[1], CHUNK do
      local rk = groups .. 'r:' .. g
      local part = #b[1] <= CHUNK and b[1] or {unpack(b[1], part_at, math.min(part_at + CHUNK - 1, #b[1]))}
      u.call('list', nil, 'RPUSH', rk, unpack(part))
      pushed[#pushed + 1] = rk; pushed[#pushed + 1] = part
    end
    for part_at = 1, #b[2], 2 * CHUNK do
      local pk = groups .. 'p:' .. g
      local part = {unpack(b[2], part_at, math.min(part_at + 2 * CHUNK - 1, #b[2]))}
      local added = u.call('zset', function()
        return function() -- (the ids are new: none was in the set)
          local m = {}
          for j = 2, #part, 2 do m[#m + 1] = part[j] end
          redis.call('ZREM', pk, unpack(m))
        end
      end, 'ZADD', pk, unpack(part))
      if dnow[g] then dnow[g] = dnow[g] + added - #part / 2 end -- (added below as #part / 2)
    end
  end
end
redis.call('HINCRBY', stats, 'seq', #new)
call_all('HSET', J.d, dcol, 2)
call_all('HSET', J.o, ocol, 2)
call_all('HSET', groups .. 'job', jcol, 2)
call_all('HSET', J.s, scol, 2)
-- monitors: each new job's 'enqueued' (as enqueue.lua's), once it is
-- written; the push below emits its jobs' 'active' after, when heard
local emit = monitor(monitored, events, now)
if emit ~= UNMONITORED then
  for _, k in ipairs(new) do emit('enqueued', out[2 * k - 1]) end
end
-- (meta groups: '1' group jobs, '2' of priorities other than 0 too: the
-- claim then reads each group's priority set, GROUPS.take; read above)
if any_prio then
  if mgroups ~= '2' then redis.call('HSET', meta, 'groups', '2') end
elseif not mgroups then
  redis.call('HSET', meta, 'groups', '1')
end

-- delayed jobs: listed, in the groups' delayed set
local rang, listed = false, {}
for _, k in ipairs(later) do
  local g = gs[k]
  if not listed[g] then GROUPS.list(groups, g); listed[g] = true end
  if push_delayed(groups .. 'delayed', out[2 * k - 1], now + delay[k]) and not rang then
    redis.call(PUB or pub_mode(), GROUPS.wake(groups), '1')
    rang = true
  end
end

-- ready jobs (in their groups already, above): per group its index,
-- listing and ring place once (GROUPS.push's steps for several ids)
if #gready > 0 then
  gc.hold = #pick > 0 -- (the doorbell: only for work the push leaves)
  local total, first_rated = 0, {}
  for _, g in ipairs(gready) do total = total + #byg[g][1] + #byg[g][2] / 2 end
  redis.call('HINCRBY', stats, 'gready', total)
  -- the depth index (GROUPS.deepen for all the call's groups: their
  -- scores read above, one ZADD): a group with a count gets it plus its
  -- new ids; one entering it (or at 0) is counted from its keys and
  -- leaves the busy set
  local before, za, unbusy = {}, {}, {} -- (before: the ready ids a group had)
  for k, g in ipairs(gready) do
    local add = #byg[g][1] + #byg[g][2] / 2
    if was[k] > 0 then
      before[g] = was[k]
      za[#za + 1] = negnum(was[k] + add); za[#za + 1] = g
    else
      za[#za + 1] = negnum(dnow[g] + add); za[#za + 1] = g
      unbusy[#unbusy + 1] = g
    end
  end
  call_all('ZADD', groups .. 'depth', za, 2)
  if #unbusy > 0 then call_all('ZREM', groups .. 'busy', unbusy) end
  for _, g in ipairs(gready) do
    local had = before[g]
    -- (a group that had ready ids, on a queue without group settings: in
    -- the ring already, GROUPS.offer, which is not called for it)
    if not (had and gc.noconf) then
      gc.rated = nil
      GROUPS.offer(groups, J, g, gc, had, true)
      -- (listed: a group that had ready ids is already; no ZADD per enqueue
      -- behind its group's backlog)
      if not had then
        GROUPS.list(groups, g)
        -- a group waiting for its rate window whose first waiting jobs these
        -- are (GROUPS.rated_bell)
        if gc.rated == g then first_rated[#first_rated + 1] = g end
      end
    end
  end
  gc.inring, gc.ringn = nil, nil -- (the push below changes the ring)
  if #pick > 0 then
    local has_prio = any_prio or mgroups == '2'
    -- (keep: what the last take did, for a push heard by nobody to take
    -- back, GROUPS.untake: no PUBSUB NUMSUB per registration, the
    -- PUBLISH's reply is the proof the worker listens; docs/scripts.md
    -- "A push heard by nobody". On a cluster no keep and no back: a
    -- SPUBLISH's count proves nothing there, so push_to_idle asks
    -- SHARDNUMSUB first and undoes nothing, as for the plain pushes)
    local keep
    local undoable = (PUB or pub_mode()) ~= 'SPUBLISH'
    local function take(want)
      keep = undoable and {} or nil
      local got = GROUPS.take(groups, J, want, now, stats, has_prio, tbase .. 'g', nil, keep)
      if #got == 0 then return got end
      return got, load_jobs(J, got)
    end
    local back = undoable and function(ids) GROUPS.untake(groups, keep, ids) end or nil
    local _, undone = push_to_idle(J, active, idle, tbase, total, emit, pick, take,
                                   deadlines, now, nil, nil, back)
    -- jobs of a push heard by nobody are ready again: idle workers woken
    -- (below when the ring was empty)
    if undone > 0 and not gc.bell then redis.call(PUB or pub_mode(), GROUPS.wake(groups), '1') end
    -- the ring was empty: this call's groups alone were in it, and stay
    -- only with jobs left (a group left in the ring is one a worker was
    -- woken for)
    if gc.bell then
      for _, g in ipairs(gready) do
        if redis.call('EXISTS', groups .. 'r:' .. g, groups .. 'p:' .. g) == 0 then
          redis.call('ZREM', groups .. 'ring', g)
          redis.call('HDEL', groups .. 'credit', g) -- (its weighted turn ends, as a claim ends it)
        end
      end
      if redis.call('EXISTS', groups .. 'ring') == 1 then
        redis.call(PUB or pub_mode(), GROUPS.wake(groups), '1')
      end
    end
  end
  for _, g in ipairs(first_rated) do
    if GROUPS.depth(groups, g) > 0 then
      redis.call(PUB or pub_mode(), GROUPS.wake(groups), '1')
      break
    end
  end
end
return out
