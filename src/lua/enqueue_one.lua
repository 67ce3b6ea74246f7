-- enqueue_one: the lean enqueue of ONE new anonymous job with default
-- options, ready at once, of priority 0 (rjq_enqueue_await, or an
-- rjq_enqueue alone in its loop turn), on a queue whose producer passes
-- no index fields and sets no bound (enqueue.c decides: what it sends
-- tells it all). It writes exactly what enqueue.lua writes for that job
-- (the same columns, state values, lease, watchers, registration and push
-- message: lib.lua job_maker, push_plan, start_jobs, push_to_idle), so
-- every other script handles the job as one of enqueue.lua's; it only
-- skips enqueue.lua's general machinery (options, ids, bounds, batches of
-- several calls, payloads ahead, index), whose Lua is most of an awaited
-- job's Redis work (docs/scripts.md, "The lean pair").
-- Where enqueue.lua would push jobs already waiting to an idle worker
-- (from_ready: a race, the queue had jobs ready and a registration), this
-- script leaves its job ready and rings the doorbell: the idle workers
-- then claim (a worker woken by the doorbell registers again).
-- Queue format 2 (docs/scripts.md "Queue format 2"; qformat.lua): a
-- client that learnt the queue's format 2 passes it, and a job pushed at
-- once with an awaiting producer then keeps the reply channel at the end
-- of its state ("active 1 <token> @<t>,<t>, <channel>") instead of in the
-- watchers column (one HSET less here, an HMGET and an HDEL less in its
-- completion). Whether the queue is format 2 now: a registration marked
-- " 2" says so (lib.lua registration(): complete_one marks the offer of
-- a worker whose job held its channel, and qformat.lua strips every mark
-- when the queue goes back to 1), else the meta field is read first (only
-- then, and the registration's rewrite is marked when it says 2): a queue
-- whose meta does not say 2 (set back, or a stale client) gets format 1's
-- writes, nothing of format 2.
-- KEYS (src/keys.def; bound to these locals): ready, prio, stats, active,
--       idle, monitored, events, pcol (payload column), scol (state
--       column), wcol (watchers column), meta
-- ARGV: 1 wake channel, 2 reply channel of an awaiting producer ('' for
--       none), 3 token base for a push (unique per call), 4 payload,
--       5 the queue format the client learnt ('2'; absent or else: 1).
-- Returns { id, 0 } as enqueue.lua does for a new job.
local wake, ch, tbase, payload = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

-- Reads first (each checks its key's type): the worker to push to, and
-- whether jobs wait and a monitor listens with one EXISTS (enqueue.lua).
local pick = redis.pcall('HRANDFIELD', idle, '1', 'WITHVALUES') -- (numbers as text: a Lua number is printed with %.17g)
if pick.err then lean_refuse(pick, idle, 'hash') end
local nothing_ready, monitored_on = ready_and_monitored(ready, prio, monitored)
local picked = #pick > 0 and pick[1] ~= CONTROL_MARK
-- a registration to push to (push_plan's test); a stale one is dropped
local wid, wch, thead, slots, epoch, lease, format, q2, lease_n
local stale = false
if picked and nothing_ready then
  wid, wch, thead = reg_field(pick[1]) -- (parses memoised: lib.lua)
  slots, epoch, lease, format, q2, lease_n = reg_value(pick[2])
  -- (no PUBSUB NUMSUB: the push's own PUBLISH counts the worker's
  -- subscribers, and a push nobody heard is undone below)
  if not wch or slots < 1 or not push_format_ok(format) then
    wid, stale = nil, true
  elseif (PUB or pub_mode()) == 'SPUBLISH' and numsub(wch) == 0 then
    -- (on a cluster SPUBLISH reaches the shard's replicas' subscribers
    -- too and counts this node's only: its reply proves nothing, so
    -- SHARDNUMSUB is asked first and the push is never undone: lib.lua
    -- push_to_idle)
    wid, stale = nil, true
  end
end

-- format 2: the channel goes in the state (the registration's mark, or
-- else meta read before the first write; a channel with a space, which
-- the state's last field cannot hold, stays in the column)
local inst = false
if wid and ch ~= '' and ARGV[5] == '2' and not string.find(ch, ' ', 1, true) then
  if q2 then
    inst = true
  else
    local f = redis.pcall('HGET', meta, 'format')
    if type(f) == 'table' and f.err then lean_refuse(f, meta, 'hash') end
    inst = f == '2'
  end
end
local stamp = now_stamp() -- (the text, made once from TIME's reply; as a number only where needed)
-- Writes: the counter first (it checks its own type: refused, nothing
-- was written); each later one checks its own type too and, refused,
-- undoes the exact writes before it (w of them: lib.lua
-- enqueue_one_refuse), as enqueue.lua's usual call does through undoable().
-- A write whose undo is not exact (its field was there: behind rjq's
-- back) has the keys written after it checked by TYPE
-- (enqueue_one_check; w is 0 from then on).
local seq = typed('hash', 'HINCRBY', stats, 'seq', '1')
local id = int(seq)
local lkey, wkey = wid and active, ch ~= '' and not inst and wcol -- (false: not written)
local w = 1
if rank_window_in(seq, seq) then -- (see "Order within a priority")
  w = enqueue_one_check(w, stats, seq, id, pcol, scol, lkey, wkey)
  renumber_prio(prio)
end
local x = redis.pcall('HSET', pcol, id, payload)
-- (x ~= 1 first: the usual reply of a write skips type(), a C call of ~250 Redis instructions)
if x ~= 1 and type(x) == 'table' then enqueue_one_refuse(x, pcol, 'hash', w, stats, seq, id, pcol, scol, lkey) end
if w > 0 then
  if x == 1 then w = 2 else w = enqueue_one_check(w, stats, seq, id, pcol, scol, lkey, wkey) end
end
local tok, deadline
if wid then
  tok = thead .. tbase .. '1' -- ("<client>.<worker>.<tbase>1")
  deadline = int(stamp + lease_n) -- (one coercion: tonumber(stamp) + lease_n)
  x = redis.pcall('HSET', scol, id, 'active 1 ' .. tok .. ' @' .. stamp .. ',' .. stamp .. (inst and ', ' .. ch or ','))
else
  x = redis.pcall('HSET', scol, id, 'ready 0 @' .. stamp .. ',,')
end
if x ~= 1 and type(x) == 'table' then enqueue_one_refuse(x, scol, 'hash', w, stats, seq, id, pcol, scol, lkey) end
if w > 0 then
  if x == 1 then w = 3 else w = enqueue_one_check(w, stats, seq, id, pcol, scol, lkey, wkey) end
end
if wid then
  x = redis.pcall('ZADD', active, '+inf', ACTIVE_PIN, deadline, id)
  if x ~= 1 and type(x) == 'table' then enqueue_one_refuse(x, active, 'zset', w, stats, seq, id, pcol, scol, lkey) end
  if w > 0 then
    if x == 1 or x == 2 then w = 4 else w = enqueue_one_check(w, stats, seq, id, pcol, scol, lkey, wkey) end
  end
end
local zr = wid and x -- (the lease's ZADD reply: its undo)
if wkey then -- (last: not undone)
  x = redis.pcall('HSET', wcol, id, ch, WATCHERS_PIN, '')
  if type(x) == 'table' then enqueue_one_refuse(x, wcol, 'hash', w, stats, seq, id, pcol, scol, lkey, zr) end
end
local emit = monitor(monitored, events, monitored_on and tonumber(stamp), monitored_on)
if emit ~= UNMONITORED then emit('enqueued', id) end

if wid then
  -- the push message of one job (push_to_idle): its wait is 0, it was
  -- enqueued now. PUBLISH's reply (the subscribers it reached) is the
  -- proof that the registered worker listens (docs/scripts.md "A push
  -- heard by nobody"): a payload sent as a message of its own follows
  -- only a head that was heard (nothing unsubscribes within a script).
  local head = wid .. ' ' .. epoch .. ' 1 ' .. tok .. ' ' .. deadline .. '\n'
  local len, m = #payload, num(DEFAULT_MAX_ATTEMPTS)
  local pub = PUB or pub_mode()
  local heard
  local sure = pub == 'SPUBLISH' -- (asked first, above: never undone)
  if len > PUSH_INLINE_MAX then
    heard = redis.call(pub, wch, head .. num(#id) .. ' - 1 ' .. m .. ' 0\n' .. id)
  elseif format == PUSH_FORMAT and len >= PUSH_SPLIT_MIN then
    heard = redis.call(pub, wch, head .. num(#id) .. ' >' .. num(len) .. ' 1 ' .. m .. ' 0\n' .. id)
    if heard > 0 or sure then redis.call(pub, wch, payload) end
  else
    heard = redis.call(pub, wch, head .. num(#id) .. ' ' .. num(len) .. ' 1 ' .. m .. ' 0\n' .. id .. payload)
  end
  if heard > 0 or sure then
    if emit ~= UNMONITORED then emit('active', id) end
    if slots > 1 then
      redis.call('HSET', idle, pick[1], registration(num(slots - 1), epoch, lease, format, q2 or inst))
    else
      redis.call('HDEL', idle, pick[1])
    end
    return {id, 0}
  end
  -- Nobody heard it (the worker is gone, or its subscriber connection is
  -- down): the push is undone in this call, so it never started the job:
  -- the job is left as a ready job is (below: the stale registration
  -- dropped, the job at the tail of ready, the doorbell), its lease gone
  -- and, on format 2, its reply channel moved to the watchers column (a
  -- ready job's state holds none).
  if inst then
    x = redis.pcall('HSET', wcol, id, ch, WATCHERS_PIN, '')
    if type(x) == 'table' then enqueue_one_refuse(x, wcol, 'hash', w, stats, seq, id, pcol, scol, lkey, zr) end
  end
  redis.call('ZREM', active, id)
  redis.call('HSET', scol, id, 'ready 0 @' .. stamp .. ',,')
  stale = true
end
if stale then redis.call('HDEL', idle, pick[1]) end
redis.call('RPUSH', ready, id)
-- the doorbell: the queue had nothing ready, or it had and a worker is
-- idle (enqueue.lua would push a waiting job to it)
if nothing_ready or picked then redis.call(PUB or pub_mode(), wake, '1') end
return {id, 0}
