-- delete: remove finished jobs for good (an operator's action): one dead
-- or cancelled job by id, or the oldest `n` of the dead or cancelled set
-- (purge, a page per call). Their records go (forget_jobs: an id with a
-- dedup time stays reserved until it is over). Waiting and running jobs
-- are not deleted here: cancelling them tells their awaits and workers;
-- completed jobs leave by their retention.
-- A job deleted whose dependents are not all released yet (its dependents
-- entry is still there: its finisher died before it told them, or a
-- release failed) has them released at once, with the outcome it ended
-- with (dead or cancelled), not by the sweep a period later: those
-- waiting in this queue are counted here (DEPS.finished in lib.lua), the
-- entries of the others are in the reply, which the client releases
-- (deps.c). The entry itself stays until they are (deps_done.lua).
-- KEYS (src/keys.def; bound to these locals): dead, cancelled, cols, dedup,
--       deps, ready, prio, delayed, stats, waiting, dependents, depsfin,
--       monitored, events, wake
-- ARGV: 1 'id', 'dead' or 'cancelled'; 2 the id, or n (<= 1000); 3 the
--       dead cap (for dependents buried by their policy 'fail'); 4 the job
--       name prefix (which names this queue: DEPS.queue, and the jobs a
--       release buries)
-- Returns, for an id: 1 deleted, -1 no such job, -2 it is in another
-- state; for a set: how many were deleted. When dependents of other queues
-- are left to release: { that, the outcome ('dead' or 'cancelled'), own,
-- then per job with some its id and its dependents entry }: first the own
-- deleted jobs' (that outcome), then those of the jobs of this queue the
-- release buried by their policy 'fail' (outcome dead).
local J = columns(cols, ARGV[4])
J.u = dedup
J.dp = deps
expect_types({dead, 'zset', cancelled, 'zset', J.u, 'zset', J.dp, 'hash', J.d, 'hash', J.s, 'hash', J.o, 'hash',
              J.r, 'hash', J.e, 'hash', J.f, 'hash', J.n, 'hash'})
local dead_max = tonumber(ARGV[3]) or 1000000

-- The dependents of jobs ids (ended `outcome`, about to be deleted) not
-- released yet: the reply's tail (see above), {} when none.
local function release(ids, outcome)
  if #ids == 0 or redis.call('EXISTS', dependents) == 0 then return {} end
  -- (a job its release buries whose dependents are of this queue: they
  -- leave no watchers mark, their entry tells: notify_finished, J.dt)
  J.dt = dependents
  local have, with = hmget(dependents, ids, 'hash'), {}
  for k, id in ipairs(ids) do if have[k] then with[#with + 1] = id end end
  if #with == 0 then return {} end
  local left, buried = DEPS.finished(J, {ready = ready, prio = prio, delayed = delayed, stats = stats,
                                         waiting = waiting, deps = deps, dead = dead, dependents = dependents,
                                         depsfin = depsfin, wake = wake, dead_max = dead_max,
                                         emit = monitor(monitored, events)}, with, outcome)
  local out = {0}
  for k = 1, #left, 2 do
    if left[k + 1] ~= '' then out[#out + 1] = left[k]; out[#out + 1] = left[k + 1]; out[1] = out[1] + 1 end
  end
  for k = 1, #buried do out[#out + 1] = buried[k] end
  return #out > 1 and out or {}
end

local function reply(n, outcome, tail)
  if #tail == 0 then return n end
  local out = {n, outcome}
  for k = 1, #tail do out[#out + 1] = tail[k] end
  return out
end

if ARGV[1] == 'id' then
  local id = ARGV[2]
  for _, key in ipairs({dead, cancelled}) do
    local at = redis.call('ZSCORE', key, id)
    if at then
      local outcome = key == dead and 'dead' or 'cancelled'
      local tail = release({id}, outcome)
      -- (a job the release buried is no longer this one: at stays its time)
      forget_jobs(J, {id}, {tonumber(at)})
      redis.call('ZREM', key, id)
      return reply(1, outcome, tail)
    end
  end
  return redis.call('HEXISTS', J.d, id) == 1 and -2 or -1
end
local key = (ARGV[1] == 'dead' and dead) or (ARGV[1] == 'cancelled' and cancelled)
if not key then return redis.error_reply('ERR unknown set ' .. ARGV[1]) end
local n = math.min(redis.call('ZCARD', key), tonumber(ARGV[2]), 1000)
local tail = {}
if n > 0 then
  -- (trim_oldest's steps, with the release before the records go; the
  -- page's own ids leave the set, not the jobs a release buried)
  local page = redis.call('ZRANGE', key, 0, n - 1, 'WITHSCORES')
  local ids, at = {}, {}
  for i = 1, #page, 2 do ids[#ids + 1] = page[i]; at[#at + 1] = tonumber(page[i + 1]) end
  tail = release(ids, ARGV[1])
  forget_jobs(J, ids, at)
  call_all('ZREM', key, ids)
end
return reply(n, ARGV[1], tail)
