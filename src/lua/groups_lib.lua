
-- ---- Job groups (README "Groups"; genqueue.lua, gconf.lua, gstats.lua,
-- the group step of claim.lua; src/groups.c) -------------------------------
-- A job may carry a group (a tenant id). Its ready place is then its
-- group's own, never the queue's ready/prio, so a plain queue (no group
-- jobs) pays nothing: its scripts find no group key and skip the step.
-- Every key of the groups is a name under the prefix G = "<prefix>:{Q}:g:"
-- (KEYS 'groups', src/keys.def):
--   G..'r:'..g   list  ready ids of group g, priority 0, FIFO
--   G..'p:'..g   zset  ready ids of g of other priorities (scores as prio's)
--   G..'a:'..g   set   ids of g's active jobs (its concurrency slots), for a
--                      group with a concurrency limit only (gconf.lua
--                      fills it when a limit is set, drops it when none)
--   G..'act'     hash  group -> its active jobs' count, for every group,
--                      "<group> s" -> the jobs it started while listed
--                      (GROUPS.sfield), and '~' -> a pin (GROUPS.count)
--                      (the listing's active column, GROUPS.tidy; one
--                      HMGET and one HSET per claim or completion, not a
--                      command per job)
--   G..'ring'    zset  the groups that can start work now (ready jobs, not
--                      paused, below their limit) -> their turn: a claim
--                      serves them lowest turn first, `weight` jobs each,
--                      and a group served that can start more takes the
--                      next turn (the back of the ring): round-robin
--   G..'all'     zset  the groups that have had jobs lately, score 0 (an
--                      enqueue adds its group; the writer that empties a
--                      group drops it, GROUPS.tidy: the listing, gstats.lua,
--                      only reads, so a read-only monitor user can run it)
--   G..'conf'    hash  group -> "<limit> <weight> <paused>[ <rate>
--                      <bound>]" ('-': the defaults'; '0': none); rate
--                      "<starts>/<window ms>"; '*' -> the defaults
--                      "<limit> <weight>[ 0 <rate> <bound>]" ('-': none;
--                      '-' weight: 1)
--   G..'s:'..g   zset  the starts of rate-limited group g in its window
--                      (member "<token> <id>", score its start ms; expires
--                      a window after its last start)
--   G..'rated'   zset  the groups at their rate limit -> the ms their
--                      window lets the next start in: out of the ring
--                      until then; a claim (GROUPS.take) offers the due
--                      ones again, and a claim that comes back short
--                      tells its worker when the first is due
--                      (GROUPS.next_due): no polling
--   G..'depth'   zset  the groups with ready ids -> minus their count (the
--                      ids in G..'r:'..g and G..'p:'..g; ascending: the
--                      deepest first, ties by name): the listing's index
--                      (gstats.lua reads a page of it, not every group).
--                      Written where ids enter or leave a group's ready
--                      place: GROUPS.push (+1), GROUPS.after (per group),
--                      GROUPS.take (one ZMSCORE and one ZADD per claim);
--                      a group missing from it is read and written at its
--                      next claim (GROUPS.taken)
--   G..'busy'    zset  the groups with running jobs and no ready ids,
--                      score 0 (by name): listed after the index's
--                      (GROUPS.busy when a claim empties a group it
--                      started jobs of; out when the group enters the
--                      index, GROUPS.deepen, or leaves the listing,
--                      GROUPS.tidy)
--   G..'credit'  hash  a weighted group whose turn is not over -> the
--                      jobs it may still start in it
--   G..'job'     hash  id -> its group, while the job lives (HDEL when it
--                      completes or dies)
--   G..'delayed' zset  id -> due time (ms) of the groups' delayed jobs
--                      (their own delay or a retry's backoff): a claim
--                      makes the due ones ready in their group
-- A group at its limit or paused leaves the ring, so it costs no claim
-- anything; a slot freed (complete, fail, reclaim: GROUPS.release) or a
-- resume puts it back and rings the doorbell when the ring was empty.
-- The meta field 'groups' (set by the first group job's enqueue) tells
-- claim.lua, which reads meta anyway, to serve the groups.
-- The queue's stats hash field 'gready' counts the group jobs in state
-- ready (made ready: GROUPS.push, GROUPS.after; started: GROUPS.take;
-- cancelled: cancel.lua), so stats.lua adds them to the queue's ready
-- depth at one read.
local GROUPS = {}
GROUPS.NAME = '^[%w_.:@%-]+$' -- (1..64 bytes: src/validate.c)

-- Whether g is a group name (GROUPS.NAME, 1..64 bytes), memoised: the
-- pattern match costs a group enqueue ~1k instructions a group of each
-- call (genqueue.lua; callgrind). The memo is emptied when it holds 4096.
local NAMED, NAMED_N = {}, 0
function GROUPS.named(g)
  if NAMED[g] then return true end
  if #g == 0 or #g > 64 or not string.match(g, GROUPS.NAME) then return false end
  if NAMED_N >= 4096 then NAMED, NAMED_N = {}, 0 end
  NAMED[g] = true; NAMED_N = NAMED_N + 1
  return true
end

-- the wake channel of the queue whose group prefix is G ("...:g:")
function GROUPS.wake(G) return string.sub(G, 1, -3) .. 'wake' end

-- parse "<limit> <weight> <paused>[ <rate> <bound>]": limit (nil: '-'),
-- weight (nil: '-'), paused (bool), rate starts and window (nil: '-'; 0:
-- none), bound (nil: '-')
local function gconf_parse(v)
  if not v then return nil, nil, false end
  local l, w, p, r, b = string.match(v, '^(%S+) (%S+) ?(%d?) ?(%S*) ?(%S*)$')
  local rn, rw = string.match(r or '', '^(%d+)/(%d+)$')
  if r == '0' then rn, rw = 0, 0 end
  return tonumber(l), tonumber(w), p == '1', tonumber(rn), tonumber(rw), tonumber(b)
end
GROUPS.parse = gconf_parse

-- the call's cache c: whether the queue's groups have no settings at all
function GROUPS.noconf(G, c)
  if c.noconf == nil then c.noconf = redis.call('EXISTS', G .. 'conf') == 0 end
  return c.noconf
end

-- group g's limit (nil: none), weight, paused, rate (starts, window ms;
-- nil: none) and bound on ready jobs (nil: none); c: the call's cache
function GROUPS.conf(G, g, c)
  if GROUPS.noconf(G, c) then return nil, 1, false end
  local v = redis.call('HMGET', G .. 'conf', g, '*')
  local l, w, p, rn, rw, b = gconf_parse(v[1])
  local dl, dw, _, drn, drw, db = gconf_parse(v[2])
  l = l or dl
  if l and l <= 0 then l = nil end
  if not rn then rn, rw = drn, drw end
  if rn and rn <= 0 then rn = nil end
  b = b or db
  if b and b <= 0 then b = nil end
  return l, math.max(w or dw or 1, 1), p, rn, rn and rw, b
end

-- group g's active count, from its slot set (g has a limit), its stale
-- members dropped when it looks full (a job that left active by a path
-- that does not release slots: its state is no longer active)
function GROUPS.active(G, J, g, limit)
  local a = G .. 'a:' .. g
  local n = redis.call('SCARD', a)
  if not limit or n < limit then return n end
  local ids = redis.call('SMEMBERS', a)
  local s = redis.call('HMGET', J.s, unpack(ids))
  local stale = {}
  for i, id in ipairs(ids) do
    if not s[i] or string.sub(s[i], 1, 7) ~= 'active ' then stale[#stale + 1] = id end
  end
  if #stale > 0 then redis.call('SREM', a, unpack(stale)) end
  return n - #stale
end

-- the next turn of the ring: after its last (read once per call, c), as
-- text: a Lua number passed to redis.call is printed with "%.17g" (Redis
-- 7.0's script_lua.c), the dearest step of a ZADD of the ring's moves
-- (callgrind, a drain of 1 000 groups: ~2k instructions per score)
function GROUPS.next_turn(G, c)
  if not c.turn then
    local t = redis.call('ZRANGE', G .. 'ring', -1, -1, 'WITHSCORES')
    c.turn = t[2] and math.floor(tonumber(t[2]) or 0) or 0
  end
  c.turn = c.turn + 1
  return int(c.turn)
end

-- The number a count's text in a reply reads as ("-9" of the depth index,
-- "1" of g:act), memoised for small integers: tonumber() of a string is a
-- strtod (~1k instructions), and a claim reads one per group from each of
-- those (its completion one more from g:act). nil for nil or false.
local NUM_OF = {}
local function count_of(s)
  if not s then return nil end
  local n = NUM_OF[s]
  if n then return n end
  n = tonumber(s)
  if n and #s <= 5 and n == math.floor(n) and n > -4096 and n < 4096 then NUM_OF[s] = n end
  return n
end

-- -n (n a count) as text, memoised for small n (see next_turn)
local NEG_TEXT = {}
local function negnum(n)
  local s = NEG_TEXT[n]
  if s then return s end
  s = int(-n)
  if n >= 0 and n < 4096 then NEG_TEXT[n] = s end
  return s
end

-- Put group g in the ring when it can start work (ready jobs, not paused,
-- below its limit); out of it when not. Rings the doorbell when the ring
-- was empty (c.hold: notes it in c.bell instead, for a caller that may
-- push the work to an idle worker itself, genqueue.lua).
-- had: the ready ids g had before those just made ready (GROUPS.deepen's
-- answer; nil: unknown). A group with no limit, no rate and not paused
-- that had ready ids is in the ring already: it leaves only when a claim
-- finds it empty (GROUPS.take, which then drops its index entry) or by its
-- settings (gconf.lua offers it again when they change), so no ZSCORE of
-- the ring is sent (a score printed with "%.17g" per enqueue).
-- readied: the caller knows g has ready ids now (it just made some ready:
-- genqueue.lua), so its list and priority set are not counted.
-- c.inring (group -> whether it is in the ring) and c.ringn (the ring's
-- size), when a caller read them for its groups (genqueue.lua: one
-- ZMSCORE and one ZCARD a call), stand for the ZSCORE and ZCARD of the
-- ring per group; kept up to date here while set.
function GROUPS.offer(G, J, g, c, had, readied)
  local ring = G .. 'ring'
  local limit, _, paused, rate = GROUPS.conf(G, g, c)
  if paused or (limit and GROUPS.active(G, J, g, limit) >= limit) then
    local gone = redis.call('ZREM', ring, g)
    if c.ringn then c.ringn = c.ringn - gone; c.inring[g] = false end
    return
  end
  if had and had > 0 and not limit and not rate then return end
  local inring = c.inring and c.inring[g]
  if inring == nil then inring = redis.call('ZSCORE', ring, g) end
  if inring then return end
  -- (at its rate limit: the claim that finds its window turned offers it)
  if rate and redis.call('ZSCORE', G .. 'rated', g) then c.rated = g; return end
  if not readied and redis.call('LLEN', G .. 'r:' .. g) == 0 and redis.call('ZCARD', G .. 'p:' .. g) == 0 then return end
  redis.call('ZADD', ring, GROUPS.next_turn(G, c), g)
  local first
  if c.ringn then
    c.ringn = c.ringn + 1; c.inring[g] = true; first = c.ringn == 1
  else
    first = redis.call('ZCARD', ring) == 1
  end
  if first then
    if c.hold then c.bell = true else redis.call(PUB or pub_mode(), GROUPS.wake(G), '1') end
  end
end

-- After an enqueue made a job ready in group g (GROUPS.push; genqueue.lua):
-- a group waiting for its rate window (GROUPS.offer noted it, c.rated)
-- whose first waiting job this is rings the doorbell, so that an idle
-- worker claims, comes back short and learns when the window turns
-- (GROUPS.next_due): the group may have gone to wait by a push (no claim
-- came back short to tell a worker), and nothing else would wake one then.
function GROUPS.rated_bell(G, g, c)
  if c.rated ~= g then return end
  if GROUPS.depth(G, g) == 1 then
    redis.call(PUB or pub_mode(), GROUPS.wake(G), '1')
  end
end

-- The slot sets of the groups gs (gconf.lua, after their settings
-- changed; active: the queue's active zset): a group with a limit now
-- holds its jobs that run (those claimed while it had none were not
-- added), one without has none (its completions no longer remove
-- theirs); the active counts are set from the same jobs. c: the call's
-- cache (GROUPS.conf).
function GROUPS.resync(G, active, gs, c)
  local want = {}
  for _, g in ipairs(gs) do want[g] = true end
  local mine = {}
  local ids = redis.call('ZRANGE', active, 0, -1)
  if #ids > 0 and redis.call('EXISTS', G .. 'job') == 1 then
    local of = hmget(G .. 'job', ids)
    for i, id in ipairs(ids) do
      local g = of[i]
      if g and want[g] then
        mine[g] = mine[g] or {}
        mine[g][#mine[g] + 1] = id
      end
    end
  end
  for _, g in ipairs(gs) do
    redis.call('DEL', G .. 'a:' .. g)
    local list = mine[g] or {}
    if #list > 0 and GROUPS.conf(G, g, c) then call_all('SADD', G .. 'a:' .. g, list) end
    if #list > 0 then redis.call('HSET', G .. 'act', g, #list) else redis.call('HDEL', G .. 'act', g) end
  end
end

-- Group g's ready ids, counted from its keys (its list and priority
-- set; the depth index keeps the count, GROUPS.deepen, GROUPS.taken).
function GROUPS.depth(G, g)
  return redis.call('LLEN', G .. 'r:' .. g) + redis.call('ZCARD', G .. 'p:' .. g)
end

-- Group g has jobs: listed (the listing, gstats.lua, reads the list).
function GROUPS.list(G, g)
  redis.call('ZADD', G .. 'all', 'NX', 0, g)
end

-- The depth index (G..'depth'): n more ids ready in group g. A group
-- that enters it is counted from its keys (it may have had ready ids
-- before: a queue of an older version, without the index). Returns the
-- ready ids g had before these n (GROUPS.offer).
function GROUPS.deepen(G, g, n)
  local was = -(tonumber(redis.call('ZADD', G .. 'depth', 'INCR', negnum(n), g)) or -n) - n
  if was == 0 then
    local d = GROUPS.depth(G, g)
    if d ~= n then redis.call('ZADD', G .. 'depth', negnum(d), g) end
    redis.call('ZREM', G .. 'busy', g)
    return nil -- (entering: the ring is asked)
  end
  return was
end

-- The depth index after a claim took cnt[g] ready ids of each group g
-- (LPOP: a cancelled job's id left behind counts, as in the index) and
-- found the groups of dry (no id taken) empty: one ZMSCORE, one ZADD and
-- one ZREM at most per claim. A group the index misses, or counts short,
-- is read (its real depth: a queue of an older version) and written.
-- (empty: the groups found empty, GROUPS.take: their depth is 0, not read)
function GROUPS.taken(G, cnt, dry, empty)
  local k, names, gone = G .. 'depth', {}, {}
  for g, n in pairs(cnt) do
    if n > 0 then
      if empty and empty[g] then gone[#gone + 1] = g else names[#names + 1] = g end
    end
  end
  for _, g in ipairs(dry) do gone[#gone + 1] = g end
  if #names > 0 then
    local v, za = redis.call('ZMSCORE', k, unpack(names)), {}
    for i, g in ipairs(names) do
      local d = v[i] and -count_of(v[i]) - cnt[g]
      if not d or d < 0 then d = GROUPS.depth(G, g) end
      if d > 0 then za[#za + 1] = negnum(d); za[#za + 1] = g else gone[#gone + 1] = g end
    end
    if #za > 0 then redis.call('ZADD', k, unpack(za)) end
  end
  if #gone > 0 then redis.call('ZREM', k, unpack(gone)) end
  return gone
end

-- The groups a claim emptied (gone, GROUPS.taken) that run jobs: the
-- index's rows with running jobs only (d: the call's started jobs by
-- group, counted by GROUPS.count, so such a group runs some; one whose ids
-- taken were all cancelled ones is read).
function GROUPS.busy(G, cnt, gone, d)
  local za = {}
  for _, g in ipairs(gone) do
    if cnt[g] and cnt[g] > 0 and (d[g] or (tonumber(redis.call('HMGET', G .. 'act', g)[1]) or 0) > 0) then
      za[#za + 1] = 0; za[#za + 1] = g
    end
  end
  if #za > 0 then redis.call('ZADD', G .. 'busy', unpack(za)) end
end

-- Group g left with nothing active or ready leaves the listing (a writer
-- does it: the completion, failure, cancel or claim that emptied it; one
-- with delayed jobs only is listed again when they become ready,
-- GROUPS.promote).
-- (gs: several groups; idle: their active counts are known to be 0,
-- GROUPS.release, else read in one HMGET.) Whether a group has ready ids,
-- cheapest first: one EXISTS of all their lists, whose count settles the
-- common case (completions in groups with a backlog: every list exists);
-- else the depth index (one ZMSCORE: a group in it has ready ids), and a
-- group it misses (empty, or not yet indexed: a queue of an older
-- version, GROUPS.taken) is asked one EXISTS of its list and priority
-- set. (Not the ring: its scores, like the index's, come back printed
-- with "%.17g", and a group in it is in the index or has a list anyway.)
-- (sf: a list the leaving groups' started-counter fields are added to,
-- for the caller's own HDEL of g:act, GROUPS.count; else deleted here)
function GROUPS.tidy(G, g, gs, idle, sf)
  gs = gs or {g}
  if #gs == 0 then return end
  local n = 0
  for i = 1, #gs, CHUNK do
    local keys = {}
    for j = i, math.min(i + CHUNK - 1, #gs) do keys[#keys + 1] = G .. 'r:' .. gs[j] end
    n = n + redis.call('EXISTS', unpack(keys))
  end
  if n == #gs then return end
  -- (a claim's dry groups, idle unknown: those its completion unlisted
  -- already, the drain's common case (the claim that took a group's last
  -- job left it in the ring, GROUPS.take), are out of G..'all': one
  -- ZMSCORE of it, not an EXISTS and two ZREMs each. A group in G..'busy'
  -- alone, out of G..'all' (none is: a tidy drops both), would stay
  -- there: the listing skips a busy group with nothing running)
  if not idle then
    local listed = {}
    for i = 1, #gs, CHUNK do
      local part = redis.call('ZMSCORE', G .. 'all', unpack(gs, i, math.min(i + CHUNK - 1, #gs)))
      for j = 1, #part do if part[j] then listed[#listed + 1] = gs[i + j - 1] end end
    end
    if #listed == 0 then return end
    gs = listed
  end
  local r = {}
  for i = 1, #gs, CHUNK do
    local part = redis.call('ZMSCORE', G .. 'depth', unpack(gs, i, math.min(i + CHUNK - 1, #gs)))
    for j = 1, #part do r[#r + 1] = part[j] end
  end
  -- (their running counts read, and, for an HDEL of its own, their
  -- started counters in the same HMGET: only those that exist are deleted)
  local own, m, a = not sf, #gs, {}
  if not idle then
    local f = {}
    for i, h in ipairs(gs) do f[i] = h; if own then f[m + i] = GROUPS.sfield(h) end end
    a = hmget(G .. 'act', f)
  end
  sf = sf or {}
  local out = {}
  for i, h in ipairs(gs) do
    if not r[i] and not a[i] and redis.call('EXISTS', G .. 'r:' .. h, G .. 'p:' .. h) == 0 then
      out[#out + 1] = h
      if not own or idle or a[m + i] then sf[#sf + 1] = GROUPS.sfield(h) end
    end
  end
  -- (out of the listing: one ZREM of each set per call, not per group)
  if #out > 0 then
    call_all('ZREM', G .. 'all', out)
    call_all('ZREM', G .. 'busy', out)
  end
  -- (their started counters leave with them: one HDEL per call, or none
  -- of its own, folded into the caller's, GROUPS.count. The claim's own
  -- HDEL (GROUPS.take, GROUPS.started) is needed: a group whose last ready
  -- id was cancelled while its job ran is kept listed by that job's
  -- completion (its list holds the id), so the claim that drops the id, or
  -- finds the group dry after, is the writer that unlists it, with no
  -- completion to fold its counter into; tests/test_groups.c
  -- a_claim_that_finds_a_group_dry_after_a_cancel_unlists_it_and_deletes_its_started_counter.
  -- A group found dry whose counter its completion deleted, the drain's
  -- common case, costs no HDEL: the counter is read first)
  if own and #sf > 0 then call_all('HDEL', G .. 'act', sf) end
end

-- (its field '~', no group's name, has a value longer than
-- hash-max-listpack-value: the hash is a hashtable from its first write,
-- where a listpack's HMGET and HSET of a claim's groups would scan it per
-- field: callgrind, a drain of 1 000 groups, +8% Redis instructions per job)
local ACT_PIN = 'rjq: keeps this hash a hashtable (longer than hash-max-listpack-value)'

-- Group g's started-jobs counter in G..'act' (GROUPS.count): its field
-- "<g> s" (a space is in no group's name, GROUPS.NAME). It counts the
-- jobs the group started (a claim's or a push's take; an undone take,
-- GROUPS.untake, takes its own back) since it was last listed: it leaves
-- the hash with the group's listing (GROUPS.tidy), so a reader that sees
-- it go down takes the new value as counted since 0 (a restart). The
-- listing (gstats.lua) returns it; `rjq top`, the dashboard and `rjq
-- serve` make a group's starts/s from two reads of it.
function GROUPS.sfield(g) return g .. ' s' end

-- Add d[g] to the active count of each group g of gs (G..'act': one read,
-- one write; a count that reaches 0 leaves the hash). started: d[g] are
-- starts (or, below 0, starts undone), added to each group's started
-- counter too (GROUPS.sfield: its fields in the same read and write, so
-- they cost arguments, not commands). tidy: the groups left with nothing
-- active are tidied (GROUPS.tidy, their counts known to be 0) between the
-- read and the write, and the started counters of those that leave the
-- listing go in the same HDEL as the running counts (GROUPS.release: one
-- command less per call that unlists groups). Returns the groups of gs
-- left with nothing active.
function GROUPS.count(G, gs, d, started, tidy)
  local k, f, m = G .. 'act', {'~'}, #gs
  for i, g in ipairs(gs) do f[i + 1] = g end
  if started then for i, g in ipairs(gs) do f[m + i + 1] = GROUPS.sfield(g) end end
  local v, set, del, idle = hmget(k, f), {}, {}, {}
  if not v[1] then set[1] = '~'; set[2] = ACT_PIN end
  for i, g in ipairs(gs) do
    local n = (count_of(v[i + 1]) or 0) + d[g]
    if n > 0 then
      set[#set + 1] = g; set[#set + 1] = num(n)
    else
      idle[#idle + 1] = g
      if v[i + 1] then del[#del + 1] = g end
    end
    if started then
      local s = (count_of(v[m + i + 1]) or 0) + d[g]
      if s > 0 then
        set[#set + 1] = GROUPS.sfield(g); set[#set + 1] = num(s)
      elseif v[m + i + 1] then
        del[#del + 1] = GROUPS.sfield(g)
      end
    end
  end
  if tidy then GROUPS.tidy(G, nil, idle, true, del) end
  if #set > 0 then call_all('HSET', k, set, 2) end
  if #del > 0 then call_all('HDEL', k, del) end
  return idle
end

-- Make job id (priority p) ready in group g (head: first of its class;
-- seq: its rank for p ~= 0, nil: a new one from stats). Returns the ready
-- ids g had before (nil: unknown; GROUPS.deepen): a group that had some
-- is listed (GROUPS.tidy drops no group the depth index holds).
function GROUPS.push(G, J, g, id, p, head, stats, c, seq)
  if p == 0 then
    if head then redis.call('LPUSH', G .. 'r:' .. g, id) else redis.call('RPUSH', G .. 'r:' .. g, id) end
  else
    if head then seq = 0 elseif not seq then
      redis.call('HINCRBY', stats, 'skipped', 1)
      seq = redis.call('HINCRBY', stats, 'seq', 1)
    end
    redis.call('ZADD', G .. 'p:' .. g, prio_score(p, seq), id)
  end
  redis.call('HINCRBY', stats, 'gready', 1)
  local had = GROUPS.deepen(G, g, 1)
  GROUPS.offer(G, J, g, c, had)
  return had
end

-- A group job carries its group as the last line of its headers in the
-- options column, "rjq.group=<name>" (genqueue.lua; its handler reads it
-- as the header rjq.group): the scripts that read the column anyway (fail,
-- reclaim) learn from it, at no command, that a job may have a group; the
-- groups' job hash has the last word. (A job whose own headers name
-- rjq.group only costs that hash's read.)
GROUPS.HEADER = 'rjq.group='
function GROUPS.hinted(o)
  return o and string.find(o, GROUPS.HEADER, 1, true) ~= nil
end

-- The groups of ids (id -> group, for those that have one).
function GROUPS.of(G, ids)
  local by = {}
  if #ids == 0 then return by end
  local v = redis.call('HMGET', G .. 'job', unpack(ids))
  for i, id in ipairs(ids) do if v[i] then by[id] = v[i] end end
  return by
end

-- Jobs ids left active (complete, fail, reclaim): their slots are freed
-- and their groups offered again. Returns id -> group.
function GROUPS.release(G, J, ids, c)
  local by = GROUPS.of(G, ids)
  -- (each group's ids: only on a queue with group settings, where a group
  -- may have a limit)
  local gs, d, per = {}, {}, not GROUPS.noconf(G, c) and {}
  for id, g in pairs(by) do
    if not d[g] then gs[#gs + 1] = g; d[g] = 0 end
    d[g] = d[g] - 1
    if per then per[g] = per[g] or {}; per[g][#per[g] + 1] = id end
  end
  if #gs == 0 then return by end
  -- (the groups left with nothing active and nothing ready leave the
  -- listing, GROUPS.tidy, in the count's call: their started counters
  -- deleted with their running counts, one HDEL; tidy reads none of what
  -- the slots' release and the offers below change)
  GROUPS.count(G, gs, d, nil, true)
  for _, g in ipairs(per and gs or {}) do
    -- only a group with a limit has slots, and can be out of the ring for
    -- want of one (one without stays in while it has ready jobs:
    -- GROUPS.take)
    if GROUPS.conf(G, g, c) then
      redis.call('SREM', G .. 'a:' .. g, unpack(per[g]))
      GROUPS.offer(G, J, g, c)
    end
  end
  return by
end

-- GROUPS.release of those of ids whose options column (o, parallel to ids)
-- names a group (GROUPS.hinted: a plain job costs no read): the jobs
-- handed back, orphaned or reclaimed (release.lua, orphans.lua,
-- reclaim.lua). Returns id -> group.
function GROUPS.release_hinted(G, J, ids, o, c)
  local hinted = {}
  for i, id in ipairs(ids) do
    if GROUPS.hinted(o[i]) then hinted[#hinted + 1] = id end
  end
  return GROUPS.release(G, J, hinted, c)
end

-- After jobs of groups were failed or returned (fail_job, return_lost
-- with the group's keys: GROUPS.q), each {group, id, the state they left
-- it in}: ready in the group again (counted, the group offered and listed
-- again: GROUPS.release may have dropped it; once per group), delayed
-- (nothing more), or dead (its group entry dropped). stats: the queue's
-- stats hash ('gready').
function GROUPS.after(G, J, done, c, stats)
  local ready, groups, gone, per = 0, {}, {}, {}
  for _, d in ipairs(done) do
    local g, id, st = d[1], d[2], d[3]
    if st == 'ready' then
      ready = ready + 1
      if not per[g] then per[g] = 0; groups[#groups + 1] = g end
      per[g] = per[g] + 1
    elseif st ~= 'delayed' then
      gone[#gone + 1] = id
    end
  end
  if ready > 0 then redis.call('HINCRBY', stats, 'gready', ready) end
  for _, g in ipairs(groups) do
    GROUPS.deepen(G, g, per[g])
    GROUPS.list(G, g)
    GROUPS.offer(G, J, g, c)
  end
  if #gone > 0 then redis.call('HDEL', G .. 'job', unpack(gone)) end
end

-- Jobs handed back unstarted (release.lua), each {group, id, ...}: their
-- starts leave their groups' rate logs (a job that did not run does not
-- count against its group's rate), and a group that waited for its window
-- leaves G..'rated', to be offered again (GROUPS.after; the next claim
-- counts its window again). A log holds the window's starts: at most the
-- rate's, read only for a group with a rate.
function GROUPS.unlog(G, done, c)
  for _, d in ipairs(done) do
    local g, id = d[1], d[2]
    if select(4, GROUPS.conf(G, g, c)) then
      local k, tail = G .. 's:' .. g, ' ' .. id
      local m = redis.call('ZRANGE', k, 0, -1)
      for i = #m, 1, -1 do
        if string.sub(m[i], -#tail) == tail then
          redis.call('ZREM', k, m[i])
          redis.call('ZREM', G .. 'rated', g)
          break
        end
      end
    end
  end
end

-- A copy of the queue table q (fail_job, return_lost) that puts a job of
-- group g back in its group.
function GROUPS.q(G, q, g)
  local r = {}
  for k, v in pairs(q) do r[k] = v end
  r.ready, r.prio, r.delayed = G .. 'r:' .. g, G .. 'p:' .. g, G .. 'delayed'
  return r
end

-- Delayed job id of group g (attempts a, times tm, options column o),
-- out of the groups' delayed set, becomes ready in its group, last of its
-- priority class (GROUPS.promote; promote.lua, an operator's "run now").
function GROUPS.ready(G, J, g, id, a, tm, o, stats, c)
  redis.call('HSET', J.s, id, state_value('ready', num(a), nil, tm))
  GROUPS.list(G, g) -- (the listing may have dropped it meanwhile)
  GROUPS.push(G, J, g, id, (parse_options(o)), false, stats, c)
end

-- The groups' delayed jobs due by now become ready in their groups.
function GROUPS.promote(G, J, now, stats, c)
  local due = redis.call('ZRANGEBYSCORE', G .. 'delayed', '-inf', int(now), 'LIMIT', '0', '1000') -- (text: next_turn)
  if #due == 0 then return end
  redis.call('ZREM', G .. 'delayed', unpack(due))
  local by = GROUPS.of(G, due)
  local o, s = redis.call('HMGET', J.o, unpack(due)), redis.call('HMGET', J.s, unpack(due))
  for i, id in ipairs(due) do
    local g = by[id]
    local st, a, _t, tm = state_of(s[i])
    if g and st == 'delayed' then GROUPS.ready(G, J, g, id, a, tm, o[i], stats, c) end
  end
end

-- The queue's group jobs that wait (for its bound, enqueue.lua and
-- genqueue.lua; its depths, stats.lua): ready ones (the stats field
-- 'gready', stats: the queue's stats hash) and delayed ones (their own
-- delay or a retry's backoff, G..'delayed'). Returns ready, delayed (the
-- sum is the first value's use: waiting).
function GROUPS.waiting(G, stats)
  local r = math.max(tonumber(typed('hash', 'HMGET', stats, 'gready')[1] or '0') or 0, 0)
  local d = redis.call('ZCARD', G .. 'delayed')
  return r + d, r, d
end

-- ms until the groups' next delayed job is due or the first group at its
-- rate limit may start again (nil: neither)
function GROUPS.next_due(G, now)
  local due
  for _, k in ipairs({'delayed', 'rated'}) do
    local nx = redis.call('ZRANGE', G .. k, '0', '0', 'WITHSCORES')
    if nx[2] then
      local t = math.max(0, tonumber(nx[2]) - now)
      if not due or t < due then due = t end
    end
  end
  return due
end

-- The groups whose rate window turned by now: offered again (they left
-- the ring at their rate limit). Only on a queue with group settings.
local function unrate(G, J, now, c)
  if GROUPS.noconf(G, c) then return end
  local due = redis.call('ZRANGEBYSCORE', G .. 'rated', '-inf', int(now), 'LIMIT', '0', '1000')
  if #due == 0 then return end
  redis.call('ZREM', G .. 'rated', unpack(due))
  for _, g in ipairs(due) do GROUPS.offer(G, J, g, c) end
end

-- Group g's starts in its rate window (rwin ms) by now, its log trimmed.
local function rate_used(G, g, now, rwin)
  local k = G .. 's:' .. g
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now - rwin)
  return redis.call('ZCARD', k)
end

-- Group g (rate rmax per rwin ms) has used its rate with this call's
-- starts (used: in its log before, mine: this call's): out of the ring
-- until its window lets the next start in (when the entry that leaves one
-- less than rmax in the window expires; this call's start at now).
local function rate_wait(G, g, now, rmax, rwin, used, mine)
  local k, t = used + mine - rmax, now + rwin
  if k < used then
    local e = redis.call('ZRANGE', G .. 's:' .. g, k, k, 'WITHSCORES')
    if e[2] then t = tonumber(e[2]) + rwin end
  end
  redis.call('ZADD', G .. 'rated', math.max(t, now + 1), g)
end

-- Take up to `want` ready jobs of the groups, round-robin over the ring
-- (several groups per call; priorities then FIFO within a group), each
-- counted in its group's active count (and slots: a group with a limit). Returns the ids and whether the ring
-- still holds groups (work left that others may start).
-- deferred (claim.lua, which reads the ids' states with their records
-- anyway): the ids popped, nil and the call's state st, for
-- GROUPS.started(st, states) to count those that start (one HMGET of the
-- states per claim, not two).
-- keep (may be nil; genqueue.lua's push): a table this call fills with
-- what a take of ids changed, for GROUPS.untake to take it back (a push
-- heard by nobody), each part made only when needed: keep.credit, a
-- weighted group's credit field before (false: none); keep.rated, the
-- groups this call sent to wait for their rate window; keep.score, the
-- priority set's score of each id taken off one; keep.st, the state
-- GROUPS.started counted with (its ids in take order: the groups' order
-- in the ring before, GROUPS.untake).
local NONE = {} -- (no ids: read only)
local ONE = {} -- (one id popped: ONE[1], read only until the next pop)
function GROUPS.take(G, J, want, now, stats, has_prio, tok, deferred, keep)
  local c = {}
  GROUPS.promote(G, J, now, stats, c)
  unrate(G, J, now, c)
  local ring = G .. 'ring'
  local ids, by, cnt, dry, empty = {}, {}, {}, {}, {}
  local used, rwins = {}, {} -- (rate-limited groups: starts in the window, window)
  local lim = {} -- (the groups' limits: only a limited group has a slot set)
  -- a weighted group keeps its turn until it started `weight` jobs in it
  -- (across claims: what is left of its turn is its credit)
  -- (a queue without group settings: every group's turn is one job, no
  -- limit, rate or pause; nothing to look up per group)
  local bare = GROUPS.noconf(G, c)
  local R, P = G .. 'r:', G .. 'p:'
  local function turn_of(g)
    if bare then return nil, 1, false, nil, nil, 1 end
    local limit, weight, paused, rmax, rwin = GROUPS.conf(G, g, c)
    local credit = weight
    if weight > 1 then
      local cv = typed('hash', 'HMGET', G .. 'credit', g)[1]
      if keep then
        keep.credit = keep.credit or {}
        if keep.credit[g] == nil then keep.credit[g] = cv or false end
      end
      credit = tonumber(cv or weight) or weight
    end
    return limit, weight, paused, rmax, rwin, credit
  end
  local rounds = 0
  -- (a few groups more than wanted per round: a group whose jobs ran out
  -- since its last turn is found empty, and leaves, at its next visit)
  while #ids < want and rounds < 8 do
    rounds = rounds + 1
    local heads = redis.call('ZRANGE', ring, 0, num(want - #ids + 7))
    if #heads == 0 then break end
    local back, out_ = {}, {} -- (the round's moves in the ring: one ZADD, one ZREM)
    -- The whole ring within the room (fewer groups than jobs wanted):
    -- `mult` rounds of turns at once, each group taking what is left of
    -- its turn and mult - 1 whole turns with one pop; the round's jobs
    -- are then put in turn order (below), as rounds one by one take them.
    local start, turns, index, mult = #ids, {}, {}, 1
    if #heads < want - #ids then
      local sc, sw = 0, 0
      for i, g in ipairs(heads) do
        turns[i], index[g] = {turn_of(g)}, i
        sc, sw = sc + turns[i][6], sw + turns[i][2]
      end
      if want - #ids >= sc then mult = 1 + math.floor((want - #ids - sc) / sw) end
    end
    for i, g in ipairs(heads) do
      if #ids >= want then break end
      local limit, weight, paused, rmax, rwin, credit
      local t = turns[i]
      if bare then weight, paused, credit = 1, false, 1
      elseif t then limit, weight, paused, rmax, rwin, credit = t[1], t[2], t[3], t[4], t[5], t[6]
      else limit, weight, paused, rmax, rwin, credit = turn_of(g) end
      local turn = credit + (mult - 1) * weight
      local n = math.min(want - #ids, turn)
      local a = cnt[g] or 0 -- (its slots: those this call took count too)
      if limit then
        lim[g] = limit
        a = a + GROUPS.active(G, J, g, limit)
        n = math.min(n, limit - a)
      end
      -- its rate: at most rmax starts in any window of rwin ms (its log's
      -- and this call's)
      local r = 0
      if rmax then
        if not used[g] then used[g], rwins[g] = rate_used(G, g, now, rwin), rwin end
        r = used[g] + (cnt[g] or 0)
        n = math.min(n, rmax - r)
      end
      local got = NONE
      if not paused and n > 0 then
        -- (priorities within a group: only on a queue that has had group
        -- jobs of a priority other than 0, meta groups '2')
        if has_prio then
          local kp = keep and {}
          got = take_ready(R .. g, P .. g, n, kp)
          if kp and #kp.scored > 0 then
            keep.score = keep.score or {}
            for x = 2, #kp.scored, 2 do keep.score[kp.scored[x]] = kp.scored[x - 1] end
          end
        elseif n == 1 then -- (one id, the drain's common turn: a bulk reply, no table made of it)
          local id = redis.call('LPOP', R .. g)
          if id then ONE[1] = id; got = ONE end
        else got = redis.call('LPOP', R .. g, num(n)) or NONE end -- (text: see next_turn)
      end
      for _, id in ipairs(got) do ids[#ids + 1] = id; by[#ids] = g end
      cnt[g] = (cnt[g] or 0) + #got
      -- a group that gave all it was asked for may have more: it stays (at
      -- the back, or at the head while its weighted turn goes on); one
      -- that gave less has no more, one paused or at its limit leaves
      if #got == n and n > 0 and not paused and (not limit or a + #got < limit) and
         (not rmax or r + #got < rmax) then
        if turn - #got > 0 then
          redis.call('HSET', G .. 'credit', g, (turn - #got - 1) % weight + 1)
        else
          if weight > 1 then redis.call('HDEL', G .. 'credit', g) end
          back[#back + 1] = GROUPS.next_turn(G, c); back[#back + 1] = g
        end
      else
        out_[#out_ + 1] = g
        if weight > 1 then redis.call('HDEL', G .. 'credit', g) end
        if rmax and not paused and r + #got >= rmax then
          rate_wait(G, g, now, rmax, rwin, used[g], r - used[g] + #got)
          if keep then keep.rated = keep.rated or {}; keep.rated[g] = true end
        end
        -- (ran dry with nothing taken now: perhaps empty, GROUPS.tidy)
        if #got < n and cnt[g] == 0 then dry[#dry + 1] = g end
        -- (gave less than asked: no ready id left, its depth 0 without a
        -- read; out of the ring, it must leave the index, GROUPS.offer)
        if not paused and n > 0 and #got < n then empty[g] = true end
      end
    end
    if #back > 0 then redis.call('ZADD', ring, unpack(back)) end
    if #out_ > 0 then redis.call('ZREM', ring, unpack(out_)) end
    if mult > 1 then -- (turn order: each group's jobs of its first turn, then of its second...)
      local blocks, j = {}, start + 1
      while j <= #ids do
        local k = j
        while k < #ids and by[k + 1] == by[j] do k = k + 1 end
        local t = turns[index[by[j]]]
        blocks[#blocks + 1] = {j, k, t[6], t[2]} -- (from, to, first turn's size, a turn's)
        j = k + 1
      end
      local nid, nby = {}, {}
      while #nid < #ids - start do
        for _, b in ipairs(blocks) do
          for x = b[1], math.min(b[1] + b[3] - 1, b[2]) do nid[#nid + 1] = ids[x]; nby[#nby + 1] = by[x] end
          b[1], b[3] = b[1] + b[3], b[4]
        end
      end
      for x = 1, #nid do ids[start + x] = nid[x]; by[start + x] = nby[x] end
    end
  end
  -- only jobs still ready start (a cancel leaves its id behind); each
  -- takes a slot of its group
  local gone = GROUPS.taken(G, cnt, dry, empty)
  GROUPS.tidy(G, nil, dry) -- (after GROUPS.taken: a dry group has left the index)
  if #ids == 0 then return ids, redis.call('EXISTS', ring) == 1 end
  local st = {G = G, J = J, ids = ids, by = by, cnt = cnt, gone = gone, lim = lim, rwins = rwins, now = now,
              stats = stats, tok = tok, c = c}
  if keep then keep.st = st end
  if deferred then return ids, nil, st end
  local out, _, more = GROUPS.started(st, redis.call('HMGET', J.s, unpack(ids)), 0)
  return out, more
end

-- After GROUPS.take (st: its state) popped st.ids: only those still ready
-- start (a cancel leaves its id behind), s[off + i] the state of the i-th;
-- each is counted in its group, takes a slot of a limited group and an
-- entry in a rate-limited group's log. Returns the ids that start, a flag
-- per id (true: it starts) and whether the ring still holds groups.
function GROUPS.started(st, s, off)
  local G, J, ids, by, cnt, gone, lim, rwins = st.G, st.J, st.ids, st.by, st.cnt, st.gone, st.lim, st.rwins
  local now, stats, tok, c = st.now, st.stats, st.tok, st.c
  local out, ok, per, stale, gs, d = {}, {}, {}, {}, {}, {}
  for i, id in ipairs(ids) do
    local g = by[i]
    local v = s[off + i]
    if v and string.sub(v, 1, 6) == 'ready ' then
      out[#out + 1] = id
      ok[i] = true
      if not d[g] then gs[#gs + 1] = g; d[g] = 0 end
      d[g] = d[g] + 1
      if lim[g] or rwins[g] then -- (its slots or its rate log: its ids)
        per[g] = per[g] or {}
        per[g][#per[g] + 1] = id
      end
    else
      stale[g] = true
    end
  end
  if #gs > 0 then GROUPS.count(G, gs, d, true) end
  GROUPS.busy(G, cnt, gone, d)
  -- a group this call emptied whose ids taken were all cancelled ones
  -- (left behind in its list: none started) and that runs nothing is
  -- unlisted here, as a dry one is (GROUPS.take): it left the ring when
  -- the claim found it empty, so no later claim would find it dry, and it
  -- stayed listed, its started counter kept, until its next job
  local left = {}
  for _, g in ipairs(gone) do if stale[g] and not d[g] then left[#left + 1] = g end end
  if #left > 0 then GROUPS.tidy(G, nil, left) end
  for g, list in pairs(per) do
    if lim[g] then redis.call('SADD', G .. 'a:' .. g, unpack(list)) end
    if rwins[g] then -- (its starts logged: its rate window)
      local za = {}
      for _, id in ipairs(list) do za[#za + 1] = now; za[#za + 1] = tok .. ' ' .. id end
      redis.call('ZADD', G .. 's:' .. g, unpack(za))
      redis.call('PEXPIRE', G .. 's:' .. g, rwins[g])
    end
  end
  -- a group whose left-behind ids (cancelled) counted against its limit in
  -- this call may have left the ring with slots free: offered again (it
  -- would wait for a release that never comes; its rate is looked at again
  -- by the next claim)
  for g in pairs(stale) do
    if rwins[g] then redis.call('ZREM', G .. 'rated', g) end
    GROUPS.offer(G, J, g, c)
  end
  if #out > 0 then redis.call('HINCRBY', stats, 'gready', negnum(#out)) end
  return out, ok, redis.call('EXISTS', G .. 'ring') == 1
end

-- Take back what GROUPS.take (its record keep) did for ids, the jobs of
-- it that started (all or none of a take's: a push heard by nobody,
-- genqueue.lua; lib.lua push_to_idle undid their leases and states): each
-- id back where the take found it (its group's ready list head, in order,
-- or its priority set with its score), its group's active count and slot
-- set, its start out of the group's rate log (its rate window's credit
-- back; a group the take sent to wait for its window out of G..'rated'),
-- a weighted group's credit as it was, its depth index entry
-- (GROUPS.deepen: counted from its keys when the take dropped it, which
-- also takes it out of the busy set), and the stats' ready group jobs.
-- The ring's order as before the take: the take visits the ring from its
-- head and every group it visits either gives jobs (one of these) or
-- leaves the ring, so these groups, in the order of their first ids (the
-- take's order), were its head: they go back before every group in it
-- (scores below its lowest, read here: nothing on the common path).
-- Only the groups of ids are touched (the take's other moves, a group
-- found empty or paused leaving the ring, stand: a claim would make
-- them).
function GROUPS.untake(G, keep, ids)
  local st = keep.st
  if #ids == 0 or not st then return end
  local by, pos = st.by, {}
  for i, id in ipairs(st.ids) do pos[id] = i end
  local gs, per = {}, {}
  for _, id in ipairs(ids) do
    local g = by[pos[id] or 0]
    if g then
      if not per[g] then per[g] = {}; gs[#gs + 1] = g end
      per[g][#per[g] + 1] = id
    end
  end
  local d, score, rated, credit = {}, keep.score or {}, keep.rated or {}, keep.credit or {}
  for _, g in ipairs(gs) do
    local list, plain, za = per[g], {}, {}
    for _, id in ipairs(list) do
      local sc = score[id]
      if sc then za[#za + 1] = sc; za[#za + 1] = id else plain[#plain + 1] = id end
    end
    if #za > 0 then redis.call('ZADD', G .. 'p:' .. g, unpack(za)) end
    if #plain > 0 then
      local lp = {}
      for x = #plain, 1, -1 do lp[#lp + 1] = plain[x] end -- (LPUSH puts the last first)
      redis.call('LPUSH', G .. 'r:' .. g, unpack(lp))
    end
    d[g] = -#list
    if st.lim[g] then redis.call('SREM', G .. 'a:' .. g, unpack(list)) end
    if st.rwins[g] then
      local m = {}
      for x, id in ipairs(list) do m[x] = st.tok .. ' ' .. id end
      redis.call('ZREM', G .. 's:' .. g, unpack(m))
    end
    if rated[g] then redis.call('ZREM', G .. 'rated', g) end
    local cv = credit[g]
    if cv then redis.call('HSET', G .. 'credit', g, cv)
    elseif cv == false then redis.call('HDEL', G .. 'credit', g) end
    GROUPS.deepen(G, g, #list)
  end
  GROUPS.count(G, gs, d, true) -- (their starts undone: their started counters too)
  local h = redis.call('ZRANGE', G .. 'ring', 0, 0, 'WITHSCORES')
  local low, ring = h[2] and math.floor(tonumber(h[2]) or 0) or 0, {}
  for k, g in ipairs(gs) do ring[#ring + 1] = low - #gs + k - 1; ring[#ring + 1] = g end
  redis.call('ZADD', G .. 'ring', unpack(ring))
  redis.call('HINCRBY', st.stats, 'gready', #ids)
end
