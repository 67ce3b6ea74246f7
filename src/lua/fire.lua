-- fire: the scheduler enqueues the jobs of due schedules and moves their
-- next fire time on. Fenced twice: by the lease (a scheduler whose lease
-- another took over changes nothing) and per schedule by its next fire
-- time (the one the scheduler read: a schedule changed or fired meanwhile
-- is left alone). Each job's id is "<schedule name>@<fire time ms>", so a
-- fire time is enqueued once even across schedulers and restarts (an
-- existing id is not touched). Jobs are created by enqueue.lua's writer,
-- lib.lua's job_maker, without push delivery (idle workers hear the
-- doorbell; fire.lua has no keys of idle workers).
-- KEYS (src/keys.def; bound to these locals): schedlease, schedules,
--       schedpayload, schednext, ready, prio, delayed, stats, cols,
--       monitored, events
-- ARGV: 1 job name prefix, 2 wake channel, 3 token, then per schedule:
--       name, the next fire time read, the spec read (a schedule set again
--       since is left alone, even when both next times are 0), the new
--       next fire time (-1: it never fires again), the number k of fire
--       times to enqueue, then those k times.
-- Returns the number of jobs enqueued, or -1 when the lease is not held.
local prefix, wake, token = ARGV[1], ARGV[2], ARGV[3]
local J = columns(cols, prefix)
expect_types({schedlease, 'string', schedules, 'hash', schedpayload, 'hash', schednext, 'zset',
              ready, 'list', prio, 'zset', delayed, 'zset', stats, 'hash', J.d, 'hash', J.o, 'hash', J.s, 'hash'})
if redis.call('GET', schedlease) ~= token then return -1 end
-- the sequence numbers its jobs take, before the first write (a HINCRBY
-- refused there left the schedules before it fired and moved on)
int_fields(stats, 'seq')
local emit = monitor(monitored, events)
local make = job_maker(J, ready, prio, delayed, wake, emit,
                       redis.call('LLEN', ready) == 0 and redis.call('ZCARD', prio) == 0)
local made, mine = 0, {} -- (mine: ids made by this call, written at its end)
local i = 4
while i <= #ARGV do
  local name, seen, seen_spec = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local nxt, k = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local cur = redis.call('ZSCORE', schednext, name)
  local spec = redis.call('HMGET', schedules, name)[1]
  if cur and spec == seen_spec and tonumber(cur) == tonumber(seen) then
    local o = string.match(spec, '^%S+ %S+ %S+ %S+ (%S+)')
    local payload = redis.call('HMGET', schedpayload, name)[1] or ''
    local delay, p, stored = 0, 0, false -- (its options read as enqueue.lua reads them)
    if o and o ~= '-' then
      local d_, p_, s_ = job_options(o)
      if d_ then delay, p, stored = d_, p_, s_ end
    end
    for f = 1, k do
      local id = name .. '@' .. ARGV[i + 4 + f]
      if not mine[id] and redis.call('HEXISTS', J.d, id) == 0 then
        mine[id] = true
        local seq = redis.call('HINCRBY', stats, 'seq', 1)
        if rank_window_in(seq, seq) then renumber_prio(prio) end
        make.add(id, payload, stored, delay, p, seq)
        made = made + 1
      end
    end
    if nxt >= 0 then redis.call('ZADD', schednext, int(nxt), name)
    else redis.call('ZREM', schednext, name) end
  end
  i = i + 5 + k
end
make.finish(nil, false) -- (no push delivery: see above)
return made
