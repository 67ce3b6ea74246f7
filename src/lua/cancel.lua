-- cancel: end a job for good, whatever it is doing short of having
-- finished. A waiting or delayed job leaves its list; a running one
-- leaves the active set, so its worker's completion or failure is refused
-- (the state no longer matches its token) and no reclaim returns it; the
-- worker's client is told on its push channel ("!cancel <token> <id>"),
-- and a worker that missed that hears it from its next lease extension
-- (extend.lua). The job's final state is "cancelled <attempts> [<token>]";
-- it is listed in the cancelled set (id -> time), of which the newest
-- `most` are kept (the oldest records are deleted past that); awaiting
-- producers are told ('cancelled').
-- Its dependents apply their policies at once (README "Dependencies and
-- batches"): those waiting in this queue are counted here (DEPS.finished in
-- lib.lua, as complete.lua and fail.lua do), the dependents entries of the
-- others are in the reply, which the client releases at once (deps.c).
-- KEYS (src/keys.def; bound to these locals): ready, prio, delayed, active,
--       stats, cancelled, cols, monitored, events, push, dedup, waiting,
--       groups, deps, depsfin, dead, dependents, wake
-- ARGV: 1 job name prefix, 2 id, 3 most cancelled (and dead) jobs kept
-- Returns { code, state, own, ... }: 1 cancelled (state: the one it left:
-- ready, delayed, active or waiting), 0 no such job, 2 already finished
-- (state: completed, dead or cancelled); then, when dependents of other
-- queues are left to release, per job with some its id and its dependents
-- entry ("<queue> <id>" lines): first the cancelled job's (own 1 when it
-- has one, else 0; outcome cancelled), then those of the jobs of this
-- queue its cancel buried by their policy 'fail' (outcome dead).
local prefix, id, most = ARGV[1], ARGV[2], tonumber(ARGV[3])
local J = columns(cols, prefix)
J.u = dedup
J.dp = deps
J.df = depsfin -- (a job finished with dependents is indexed for the sweep: notify_finished)
expect_types({ready, 'list', prio, 'zset', delayed, 'zset', active, 'zset', stats, 'hash',
              cancelled, 'zset', J.s, 'hash', J.d, 'hash', J.o, 'hash', J.n, 'hash', J.u, 'zset', J.dp, 'hash',
              waiting, 'zset'})
local v = fields(J, id, 'd', 's', 'o', 'n')
if not v[1] then return {0, '', 0} end
local state, attempts, tok, tm, ch = state_text(v[2])
-- (format 2: an active job's reply channel in its state is told as a watcher)
if ch then v[4] = v[4] and (v[4] .. ' ' .. ch) or ch end
if state == 'completed' or state == 'dead' or state == 'cancelled' then return {2, state, 0} end
-- the counter it counts, before the first write (a HINCRBY refused at the
-- end left the job cancelled and its awaits untold)
int_fields(stats, 'cancelled')
if state == 'active' then
  redis.call('ZREM', active, id)
  if tok then
    -- its holder's client: the first part of the token (held index, lib.lua)
    local cid = string.match(tok, '^([^.]+)%.')
    if cid then
      redis.call(PUB or pub_mode(), push .. cid, '!cancel ' .. tok .. ' ' .. id)
    end
  end
elseif state == 'waiting' then
  redis.call('ZREM', waiting, id) -- (waiting for dependencies: deps_add.lua)
  -- held: its 'w' lines stay pending (not read as completed: deps_read.lua)
  local list = redis.call('HMGET', J.dp, id)[1]
  local head, rest = string.match(list or '', '^(%a+ %d+ %-?%d+)(\n.*)$')
  if head then redis.call('HSET', J.dp, id, head .. ' h' .. rest) end
else
  unqueue(ready, prio, delayed, id, state, v[3])
end
local now = now_ms()
local t = int(now)
redis.call('HSET', J.s, id, state_value('cancelled', attempts, state == 'active' and tok or nil,
                                        times_ended(tm, t)))
redis.call('ZADD', cancelled, t, id)
redis.call('HINCRBY', stats, 'cancelled', 1)
-- a job of a group (README "Groups"): a running one frees its slot; a
-- ready one's id is left in its group, where a claim drops it (no
-- longer counted ready: 'gready', groups_lib.lua), a delayed one leaves
-- the groups' delayed set
if GROUPS.hinted(v[3]) then
  if state == 'active' then GROUPS.release(groups, J, {id}, {}) end
  -- (a delayed one leaves the groups' delayed set: counted in the depths)
  if state == 'delayed' then redis.call('ZREM', groups .. 'delayed', id) end
  if redis.call('HDEL', groups .. 'job', id) == 1 and state == 'ready' then
    redis.call('HINCRBY', stats, 'gready', -1)
  end
end
local emit = monitor_and_dependents(J, monitored, events, dependents) -- (J.dt: notify_finished)
emit('cancelled', id)
DEPS_TOLD[1] = false
notify_finished(J, id, v[4], 'cancelled', '')
local out = {1, state, 0}
if DEPS_TOLD[1] then
  local left, buried = DEPS.finished(J, {ready = ready, prio = prio, delayed = delayed, stats = stats,
                                         waiting = waiting, deps = deps, dead = dead, dependents = dependents,
                                         depsfin = depsfin, wake = wake, dead_max = most, emit = emit},
                                     {id}, 'cancelled')
  if left[2] ~= '' then out[3] = 1; out[4] = id; out[5] = left[2] end
  for i = 1, #buried do out[#out + 1] = buried[i] end
end
local extra = redis.call('ZCARD', cancelled) - most
if extra > 0 then trim_oldest(J, cancelled, extra) end
return out
