-- genqueue: enqueue a job of a group (README "Groups"; groups_lib.lua):
-- its columns as enqueue.lua writes them, its group in the groups' job
-- hash, and its place in its group's ready list (or prio set), or in the
-- groups' delayed set; the group enters the round-robin ring when it can
-- start work (the doorbell rings when the ring was empty, or when a
-- delayed job became the groups' earliest). Push delivery: when a worker
-- registered idle slots (lib.lua offer_slots; none on a paused or limited
-- queue: CONTROL_MARK), one job is pushed to it (push_to_idle), the one
-- the claim would start next (GROUPS.take: the ring's next turn, within
-- its group's limits; not always the new job). The queue's meta field
-- 'groups' is set, so claims serve the groups from then on.
-- KEYS (src/keys.def; bound to these locals): stats, cols, meta, groups,
--       ready, prio, delayed, active, idle, monitored, events, deadlines
-- ARGV: 1 id ('' = assign the next number), 2 payload, 3 options ('' =
--       defaults, else as enqueue.lua takes them; no debounce), 4 group,
--       5 the queue's max waiting jobs (0 or absent: no bound),
--       6 token base for a pushed job (unique per call; absent: no push)
-- Returns { id, existed }: an id that exists is reported (existed = 1)
-- and nothing is written. A bounded queue (ARGV 5 > 0) that has that
-- many jobs waiting (its own ready and delayed ones and its groups',
-- GROUPS.waiting) refuses the job: the error "RJQFULL ..." (RJQ_EFULL),
-- nothing written. A group with a bound on its ready jobs (gconf
-- max_waiting) that has that many refuses the job the same way. A delayed
-- job is refused the same (its group's ready jobs are counted when it is
-- enqueued, not when it becomes ready).
local id, payload, opts, g, tbase = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[6]
local max_waiting = tonumber(ARGV[5] or '0') or 0
local J = columns(cols)
if #g == 0 or #g > 64 or not string.match(g, GROUPS.NAME) then
  return redis.error_reply('ERR rjq genqueue: bad group name')
end
-- (its group rides as its last header: GROUPS.hinted in groups_lib.lua)
if opts == '' then opts = '0,0,3,' end
opts = opts .. '\n' .. GROUPS.HEADER .. g
local delay, p, stored, _, debounce = job_options(opts)
if not delay or debounce then return redis.error_reply('ERR rjq genqueue: bad job options') end
expect_types({stats, 'hash', J.d, 'hash', J.s, 'hash', J.o, 'hash', meta, 'hash', groups .. 'job', 'hash',
              groups .. 'r:' .. g, 'list', groups .. 'p:' .. g, 'zset', groups .. 'ring', 'zset',
              groups .. 'all', 'zset', groups .. 'delayed', 'zset', groups .. 'conf', 'hash',
              groups .. 'depth', 'zset', groups .. 'busy', 'zset'})
int_fields(stats, 'seq', 'skipped', 'gready')
if id ~= '' and redis.call('HEXISTS', J.d, id) == 1 then return {id, 1} end
if max_waiting > 0 then
  local waiting = typed('list', 'LLEN', ready) + typed('zset', 'ZCARD', prio) +
                  typed('zset', 'ZCARD', delayed) + GROUPS.waiting(groups, stats)
  if waiting + 1 > max_waiting then
    return redis.error_reply(string.format('RJQFULL the queue has %d waiting jobs; 1 more '
      .. 'would pass max_waiting %d', waiting, max_waiting))
  end
end
local gc = {} -- (the call's cache of the groups' settings)
local limit, _, _, rate, _, bound = GROUPS.conf(groups, g, gc)
-- (what a limited or rated group's offer reads: checked only for such a group)
if limit then expect_types({groups .. 'a:' .. g, 'set'}) end
if rate then expect_types({groups .. 'rated', 'zset'}) end
if bound then
  local waiting = redis.call('LLEN', groups .. 'r:' .. g) + redis.call('ZCARD', groups .. 'p:' .. g)
  if waiting >= bound then
    return redis.error_reply(string.format('RJQFULL the group %s has %d waiting jobs; one more '
      .. 'would pass its max_waiting %d', g, waiting, bound))
  end
end
-- an idle worker to push to (read, and the keys a push writes checked,
-- before the first write)
local pick = {}
if tbase and delay == 0 then
  pick = typed('hash', 'HRANDFIELD', idle, 1, 'WITHVALUES')
  if #pick > 0 and pick[1] ~= CONTROL_MARK then expect_types({active, 'zset', deadlines, 'zset'}) end
end
local seq = redis.call('HINCRBY', stats, 'seq', 1)
if id == '' then id = int(seq) end
local now = now_ms()
local qtimes = int(now) .. ',,'
redis.call('HSET', J.d, id, payload)
if stored then redis.call('HSET', J.o, id, stored) end
redis.call('HSET', groups .. 'job', id, g)
-- (meta groups: '1' group jobs, '2' of priorities other than 0 too: the
-- claim then reads each group's priority set, GROUPS.take)
if p ~= 0 then redis.call('HSET', meta, 'groups', '2') else redis.call('HSETNX', meta, 'groups', '1') end
if delay > 0 then
  GROUPS.list(groups, g)
  redis.call('HSET', J.s, id, state_value('delayed', '0', nil, qtimes))
  if push_delayed(groups .. 'delayed', id, now + delay) then
    redis.call(PUB or pub_mode(), GROUPS.wake(groups), '1')
  end
else
  redis.call('HSET', J.s, id, state_value('ready', '0', nil, qtimes))
  gc.hold = #pick > 0 -- (the doorbell: only for work the push leaves)
  -- (listed: a group that had ready ids is already, GROUPS.push; no ZADD
  -- per enqueue behind its group's backlog)
  local had = GROUPS.push(groups, J, g, id, p, false, stats, gc, seq)
  if not had or had == 0 then GROUPS.list(groups, g) end
  if #pick > 0 then
    local has_prio = p ~= 0 or redis.call('HMGET', meta, 'groups')[1] == '2'
    local function take(n)
      local ids = GROUPS.take(groups, J, n, now, stats, has_prio, tbase .. 'g')
      if #ids == 0 then return ids end
      return ids, load_jobs(J, ids)
    end
    push_to_idle(J, active, idle, tbase, 1, monitor(monitored, events, now), pick, take, deadlines, now)
    -- the ring was empty: g alone was in it, and stays only with jobs left
    -- (a group left in the ring is one a worker was woken for)
    if gc.bell then
      if redis.call('EXISTS', groups .. 'r:' .. g, groups .. 'p:' .. g) == 0 then
        redis.call('ZREM', groups .. 'ring', g)
        redis.call('HDEL', groups .. 'credit', g) -- (its weighted turn ends, as a claim ends it)
      elseif redis.call('EXISTS', groups .. 'ring') == 1 then
        redis.call(PUB or pub_mode(), GROUPS.wake(groups), '1')
      end
    end
  end
  GROUPS.rated_bell(groups, g, gc)
end
return {id, 0}
