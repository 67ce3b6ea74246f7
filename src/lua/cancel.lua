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
-- KEYS (src/keys.def; bound to these locals): ready, prio, delayed, active,
--       stats, cancelled, cols, monitored, events, push, dedup, waiting,
--       groups, deps, depsfin
-- ARGV: 1 job name prefix, 2 id, 3 most cancelled jobs kept
-- Returns { code, state, told }: 1 cancelled (state: the one it left:
-- ready, delayed, active or waiting), 0 no such job, 2 already finished
-- (state: completed, dead or cancelled); told 1 when the job cancelled has
-- dependents to release (deps_due.lua), else 0.
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
local emit = monitor(monitored, events)
emit('cancelled', id)
DEPS_TOLD[1] = false
notify_finished(J, id, v[4], 'cancelled', '')
local told = DEPS_TOLD[1] and 1 or 0
local extra = redis.call('ZCARD', cancelled) - most
if extra > 0 then trim_oldest(J, cancelled, extra) end
return {1, state, told}
