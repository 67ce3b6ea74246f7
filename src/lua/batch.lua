-- batch: a batch of jobs of any queues (rjq.h "Batches", src/batch.c,
-- src/deps.c). The batch lives in this queue's slot: its record in
-- batches, each member's mark in the batch's marks hash (batchm .. id,
-- one field per member, written once by its add and once by its release:
-- O(1) per job, no list read by each completion). A member joins in the client's steps on its own queue
-- (the job enqueued, then deps_watch.lua records the batch among its
-- dependents as "{b}<this queue> <batch id>"), then 'add' here; when it
-- finishes its finisher (or the dependency sweep) sends 'release' here,
-- idempotent: a member is counted once, whichever of add and release
-- comes first. Once the batch is sealed and every member counted, it
-- ends (completed, or dead when a member died) and its completion jobs
-- are enqueued in this queue: on_complete always, on_success when none
-- died, each with the counts in its headers.
-- KEYS (src/keys.def; bound to these locals): ready, prio, delayed, stats,
--       cols, monitored, events, batches, batchm (a prefix), batchend,
--       batchlist
-- ARGV: 1 op, 2 job name prefix, 3 wake channel, 4 batch id ('' with
--       create: assign the next number), then by op:
--   create  5 flags ('', 'c', 's', 'cs': which completion jobs), 6 the
--           on_complete payload, 7 the on_success payload, 8 its
--           retention (ms; -1 kept until deleted; '' the default)
--           -> { id, existed 0/1 }
--   add     per member (any number of them, in threes): its queue, its
--           id, its outcome if it finished already ('completed', 'dead',
--           'cancelled', 'missing'), else ''
--           -> per member 1 added, 0 added already, -1 sealed; or -2 (no
--           such batch)
--   release 5 member's queue, 6 its id, 7 its outcome
--           -> { code, 0 }: 0 nothing changed, 1 counted, 2 counted and
--           the batch ended (the shape of deps_release.lua's reply)
--   seal    -> 1 sealed (2: and it ended), 0 sealed already, -2 no such
--   get     -> the record (below), or false
--   delete  5 '1': also a pending batch -> 1 deleted, -1 pending (not
--           forced), -2 no such batch. A pending batch's awaiting clients
--           hear 'cancelled'; its members' releases find no batch.
--   watch   (an awaiting client, rjq_batch_await: ARGV 4 is its reply
--           channel, 5... the batch ids) -> per id { code, body, '' } as
--           watch.lua answers: 0 no such batch, 1 ended (body: the
--           record), 3 pending, the channel now among its watchers (field
--           "<id> w", space-separated); the call that ends the batch
--           publishes its record to them (notify, kind 'completed', name
--           "<batches key> <id>") and drops the field. Run only once the
--           channel's subscription is confirmed: no end falls in between.
--   list    (rjq_batch_list: ARGV 4 the state, '' any, 'pending',
--           'completed' or 'dead'; 5 the cursor, '' from the newest; 6 the
--           page size, 1..1000) -> { cursor, id, record, ... }: the page's
--           batches, newest created first; cursor '' once the listing is
--           over. Reads `limit` entries of the index and their records,
--           whatever the number of batches (batchlist, below); an ended
--           batch past its retention is left out (as get leaves it).
--   sweep   (the queue's periodic visit, upkeep.c; ARGV 4 '') -> how many
--           ended batches past their retention were deleted (up to SWEEP).
-- The record (batches, field id): "<state> <sealed 0/1> <total>
-- <completed> <dead> <cancelled> <created ms> <ended ms> <flags>", state
-- pending, completed or dead; flags '-' or which completion jobs it has
-- ('c', 's', 'cs'), their payloads in fields "<id> c" and "<id> s" until
-- it ends (ids have no blanks). Field "0" numbers the batches (assigned
-- ids are all digits, a caller's never are). Member marks (hash batchm ..
-- id, field "<queue> <id>"): 'a' added, waiting; 'f' counted; 'r<mark>'
-- released before its add, not counted yet (mark c, d, x, m as in
-- deps_add.lua); kept once the batch ended, so a release sent again
-- still finds its mark.
-- Retention: an ended batch is listed in batchend, scored when its record
-- goes (ended + its retention, "<id> k" or BATCH_RETENTION_MS; -1: not
-- listed, kept until deleted). Reads (get, watch) find no batch past that
-- time; every create, add, seal and delete first deletes up to SWEEP of
-- those due (record, fields, marks hash): a TIME and one ZRANGEBYSCORE
-- when none is (not a release: a member's finish costs what it did); so
-- does the queue's periodic visit (op sweep), when reclaim.lua found one
-- due, so batches go with no batch call made.
-- The listing's index (batchlist, score 0, read by lex range): per batch
-- "a:<key>" and "<p|c|d>:<key>" (its state: pending, completed, dead),
-- <key> = "<999999999999999 - created ms, 15 digits>:<id>" (newest
-- first); written with the record: create adds both, the end moves the
-- state entry, forget removes them (O(1) each).
local op, prefix, wake, bid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local BATCH_RETENTION_MS = 86400000 -- rjq.h rjq_batch_options.retention_ms
local SWEEP = 16
local MARKS = {completed = 'c', dead = 'd', cancelled = 'x', missing = 'm'}
-- (batches, batchend and the marks: their first reads, typed(), check their types)

local function parse(rec)
  local st, se, t, c, d, x, cr, en, fl =
    string.match(rec, '^(%a+) ([01]) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%S+)$')
  if not st then error({err = 'WRONGTYPE batch ' .. bid .. ' of ' .. batches .. ' is not rjq\'s'}) end
  return {state = st, sealed = se == '1', total = tonumber(t), c = tonumber(c), d = tonumber(d),
          x = tonumber(x), created = cr, ended = en, flags = fl}
end

local function record(b)
  return table.concat({b.state, b.sealed and '1' or '0', int(b.total), int(b.c), int(b.d),
    int(b.x), b.created, b.ended, b.flags}, ' ')
end

local function store(b)
  redis.call('HSET', batches, bid, record(b))
end

-- A batch's key in the listing's index (created: its created ms).
local LETTER = {pending = 'p', completed = 'c', dead = 'd'}
local function list_key(created, id)
  local v = int(999999999999999 - tonumber(created))
  return string.rep('0', 15 - #v) .. v .. ':' .. id
end

local function count(b, mark)
  if mark == 'c' then b.c = b.c + 1
  elseif mark == 'x' then b.x = b.x + 1
  else b.d = b.d + 1 end -- dead, or missing (its record was deleted)
end

-- The batch ends when sealed with every member counted: its completion
-- jobs are enqueued here. Returns true when it ended.
local function maybe_end(b)
  if b.state ~= 'pending' or not b.sealed or b.c + b.d + b.x < b.total then return false end
  local J = columns(cols, prefix) -- (types checked first: checks_to_end)
  b.state = b.d > 0 and 'dead' or 'completed'
  b.ended = int(now_ms())
  local heads = 'rjq.batch=' .. bid .. '\nrjq.batch.total=' .. int(b.total) ..
    '\nrjq.batch.completed=' .. int(b.c) .. '\nrjq.batch.dead=' .. int(b.d) ..
    '\nrjq.batch.cancelled=' .. int(b.x)
  local make = nil
  for _, k in ipairs({'c', 's'}) do
    local want = string.find(b.flags, k, 1, true) and (k == 'c' or b.d == 0)
    local pay = redis.call('HMGET', batches, bid .. ' ' .. k)[1]
    local jid = 'batch:' .. bid .. (k == 'c' and ':complete' or ':success')
    if want and pay and redis.call('HEXISTS', J.d, jid) == 0 then
      make = make or job_maker(J, ready, prio, delayed, wake, monitor(monitored, events),
                               redis.call('LLEN', ready) == 0 and redis.call('ZCARD', prio) == 0)
      local seq = redis.call('HINCRBY', stats, 'seq', 1)
      make.add(jid, pay, '0,,\n' .. heads .. '\nrjq.batch.on=' ..
               (k == 'c' and 'complete' or 'success'), 0, 0, seq)
    end
  end
  if make then make.finish(nil, false) end
  -- the awaiting clients hear of its end (the record as stored after this)
  local chs = redis.call('HMGET', batches, bid .. ' w')[1]
  if chs then notify(chs, batches .. ' ' .. bid, 'completed', record(b)) end
  redis.call('HDEL', batches, bid .. ' c', bid .. ' s', bid .. ' w')
  -- (its state entry moves; a batch made before the index has none)
  local lk = list_key(b.created, bid)
  if redis.call('ZREM', batchlist, 'p:' .. lk) == 1 then
    redis.call('ZADD', batchlist, 0, LETTER[b.state] .. ':' .. lk)
  end
  local keep = tonumber(redis.call('HMGET', batches, bid .. ' k')[1] or BATCH_RETENTION_MS)
  if keep and keep >= 0 then redis.call('ZADD', batchend, int(tonumber(b.ended) + keep), bid) end
  return true
end

-- The keys an end writes, checked before a script's first write when the
-- batch may end (it is sealed).
local function checks_to_end()
  local J = columns(cols, prefix)
  expect_types({ready, 'list', prio, 'zset', delayed, 'zset', J.d, 'hash', J.s, 'hash', J.o, 'hash'})
  int_fields(stats, 'seq')
  expect_types({batchend, 'zset', batchlist, 'zset'})
end

-- Batch id gone: its record, fields, member marks and listing entries.
-- (callers check batchlist's type before their first write)
local function forget(id)
  local rec = redis.call('HMGET', batches, id)[1]
  local cr = rec and string.match(rec, '^%a+ [01] %d+ %d+ %d+ %d+ (%d+) ')
  if cr then
    local lk = list_key(cr, id)
    redis.call('ZREM', batchlist, 'a:' .. lk, 'p:' .. lk, 'c:' .. lk, 'd:' .. lk)
  end
  redis.call('HDEL', batches, id, id .. ' c', id .. ' s', id .. ' w', id .. ' k')
  redis.call('UNLINK', batchm .. id)
  redis.call('ZREM', batchend, id)
end

-- An ended batch whose record is past its retention reads as none.
local function expired(id)
  local t = typed('zset', 'ZSCORE', batchend, id)
  return t and tonumber(t) <= now_ms()
end

-- The ended batches whose records are due go (a few per call: create,
-- add, seal, delete, before their own work).
local function sweep()
  local due = typed('zset', 'ZRANGEBYSCORE', batchend, '-inf', int(now_ms()), 'LIMIT', 0, SWEEP)
  if #due > 0 then expect_types({batches, 'hash', batchlist, 'zset'}) end
  for _, id in ipairs(due) do forget(id) end
  return #due
end

if op == 'sweep' then return sweep() end

if op == 'list' then
  local L = LETTER[bid] or (bid == '' and 'a')
  local after, limit = ARGV[5] or '', tonumber(ARGV[6])
  if not L or not limit or limit < 1 or limit > 1000 or limit ~= math.floor(limit) or
     (after ~= '' and not string.match(after, '^%d+:%S+$')) then
    return redis.error_reply('ERR rjq batch: bad list arguments')
  end
  expect_types({batches, 'hash', batchend, 'zset'})
  local from = after == '' and ('[' .. L .. ':') or ('(' .. L .. ':' .. after)
  local keys = typed('zset', 'ZRANGEBYLEX', batchlist, from, '[' .. L .. ';', 'LIMIT', 0, limit)
  local out = {''}
  if #keys == 0 then return out end
  local ids = {}
  for i, k in ipairs(keys) do ids[i] = string.match(k, '^%a:%d+:(.+)$') or '' end
  local recs = redis.call('HMGET', batches, unpack(ids))
  local now = now_ms()
  for i, id in ipairs(ids) do
    local r = recs[i]
    if r and string.sub(r, 1, 8) ~= 'pending ' then
      local t = redis.call('ZSCORE', batchend, id)
      if t and tonumber(t) <= now then r = nil end -- (past its retention: none)
    end
    if r then out[#out + 1] = id; out[#out + 1] = r end
  end
  if #keys == limit then out[1] = string.sub(keys[#keys], 3) end
  return out
end

if op == 'create' then
  local flags = ARGV[5]
  if flags == '' then flags = '-' end
  local keep = ARGV[8] or ''
  if keep ~= '' and (not string.match(keep, '^%-?%d+$') or tonumber(keep) < -1) then
    return redis.error_reply('ERR rjq batch: bad retention')
  end
  expect_types({batches, 'hash', batchlist, 'zset'})
  sweep()
  if bid ~= '' and redis.call('HEXISTS', batches, bid) == 1 then return {bid, 1} end
  if bid == '' then bid = int(typed('hash', 'HINCRBY', batches, '0', 1)) end
  local t = int(now_ms())
  local b = {state = 'pending', sealed = false, total = 0, c = 0, d = 0, x = 0, created = t,
             ended = '0', flags = flags}
  store(b)
  local lk = list_key(t, bid)
  redis.call('ZADD', batchlist, 0, 'a:' .. lk, 0, 'p:' .. lk)
  if string.find(flags, 'c', 1, true) then redis.call('HSET', batches, bid .. ' c', ARGV[6]) end
  if string.find(flags, 's', 1, true) then redis.call('HSET', batches, bid .. ' s', ARGV[7]) end
  if keep ~= '' then redis.call('HSET', batches, bid .. ' k', keep) end
  return {bid, 0}
end

if op == 'watch' then
  local ch = ARGV[4]
  local out, fv = {}, {}
  for i = 5, #ARGV do
    bid = ARGV[i] -- (parse names it)
    local r = typed('hash', 'HMGET', batches, bid, bid .. ' w')
    local b = r[1] and parse(r[1])
    if b and b.state ~= 'pending' and expired(bid) then b = nil end
    if not b then
      out[#out + 1] = 0; out[#out + 1] = ''
    elseif b.state ~= 'pending' then
      out[#out + 1] = 1; out[#out + 1] = r[1]
    else
      local n = fv[bid] or r[2] or ''
      if not string.find(' ' .. n .. ' ', ' ' .. ch .. ' ', 1, true) then
        n = n == '' and ch or n .. ' ' .. ch
        if not fv[bid] then fv[#fv + 1] = bid end
        fv[bid] = n
      end
      out[#out + 1] = 3; out[#out + 1] = ''
    end
    out[#out + 1] = ''
  end
  -- (written after every record was read and checked: an error writes nothing)
  for _, id in ipairs(fv) do redis.call('HSET', batches, id .. ' w', fv[id]) end
  return out
end

-- (not in a release: a member's finish pays no more than its count)
if op ~= 'get' and op ~= 'release' then sweep() end
local rec = typed('hash', 'HMGET', batches, bid)[1]
if op == 'get' then
  if rec and string.sub(rec, 1, 8) ~= 'pending ' and expired(bid) then return false end
  return rec or false
end
local marks = batchm .. bid -- (the batch's member marks)
if not rec then
  if op == 'release' then return {0, 0} end
  return -2
end
local b = parse(rec)

if op == 'delete' then
  expect_types({batchlist, 'zset'})
  if b.state == 'pending' then
    if ARGV[5] ~= '1' then return -1 end
    -- its awaiting clients hear that it went
    local chs = redis.call('HMGET', batches, bid .. ' w')[1]
    if chs then notify(chs, batches .. ' ' .. bid, 'cancelled', '') end
  end
  forget(bid)
  return 1
end

if op == 'seal' then
  if b.sealed then return 0 end
  checks_to_end()
  b.sealed = true
  local ended = maybe_end(b)
  store(b)
  return ended and 2 or 1
end

if op == 'add' then
  -- members in threes: its queue, its id, its outcome ('' still waiting)
  if #ARGV < 7 or (#ARGV - 4) % 3 ~= 0 then return redis.error_reply('ERR rjq batch: bad add') end
  for i = 7, #ARGV, 3 do
    if ARGV[i] ~= '' and not MARKS[ARGV[i]] then return redis.error_reply('ERR rjq batch: bad outcome') end
  end
  local out = {}
  if b.sealed then
    for i = 5, #ARGV, 3 do out[#out + 1] = -1 end
    return out
  end
  local changed = false
  for i = 5, #ARGV, 3 do
    local field = ARGV[i] .. ' ' .. ARGV[i + 1]
    local mark = MARKS[ARGV[i + 2]]
    local m = typed('hash', 'HMGET', marks, field)[1]
    if m == 'a' or m == 'f' then
      out[#out + 1] = 0
    else
      b.total = b.total + 1
      if m then mark = string.sub(m, 2) end -- released before its add
      if mark then
        count(b, mark)
        redis.call('HSET', marks, field, 'f')
      else
        redis.call('HSET', marks, field, 'a')
      end
      changed = true
      out[#out + 1] = 1
    end
  end
  if changed then store(b) end
  return out
end

local field = ARGV[5] .. ' ' .. ARGV[6]
local outcome = ARGV[7]
local mark = MARKS[outcome]
if op == 'release' then
  if not mark then return redis.error_reply('ERR rjq batch: bad outcome') end
  local m = typed('hash', 'HMGET', marks, field)[1]
  if m == 'a' then
    -- (the keys an end writes are checked only when this release ends it)
    if b.sealed and b.c + b.d + b.x + 1 >= b.total then checks_to_end() end
    redis.call('HSET', marks, field, 'f')
    count(b, mark)
    local ended = maybe_end(b)
    store(b)
    return {ended and 2 or 1, 0}
  end
  -- not added yet: kept for its add (an unsealed batch only: a sealed one
  -- takes no more members)
  if not m and not b.sealed then redis.call('HSET', marks, field, 'r' .. mark) end
  return {0, 0}
end
return redis.error_reply('ERR rjq batch: unknown op')
