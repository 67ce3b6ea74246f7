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
--       cols, monitored, events, batches, batchm (a prefix), batchend
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
-- when none is (not a release: a member's finish costs what it did).
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
  expect_types({batchend, 'zset'})
end

-- Batch id gone: its record, fields and member marks.
local function forget(id)
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
  for _, id in ipairs(due) do forget(id) end
end

if op == 'create' then
  local flags = ARGV[5]
  if flags == '' then flags = '-' end
  local keep = ARGV[8] or ''
  if keep ~= '' and (not string.match(keep, '^%-?%d+$') or tonumber(keep) < -1) then
    return redis.error_reply('ERR rjq batch: bad retention')
  end
  expect_types({batches, 'hash'})
  sweep()
  if bid ~= '' and redis.call('HEXISTS', batches, bid) == 1 then return {bid, 1} end
  if bid == '' then bid = int(typed('hash', 'HINCRBY', batches, '0', 1)) end
  local t = int(now_ms())
  local b = {state = 'pending', sealed = false, total = 0, c = 0, d = 0, x = 0, created = t,
             ended = '0', flags = flags}
  store(b)
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
