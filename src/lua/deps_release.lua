-- deps_release: count dependencies of waiting jobs as finished (each
-- outcome: 'completed', 'dead', 'cancelled' or 'missing'), several at once
-- (those a client carries to this queue in one pass). Carried by the
-- client that finished the dependency (or by the sweep, or by the
-- enqueuing client when the dependency had finished before it was
-- registered): idempotent, a dependency is counted once, so a release
-- sent again changes nothing. A dependency that ended otherwise than
-- completed applies the job's policy: 'fail' buries the job (dead, with
-- an error naming the dependency), 'run' counts it as done, 'ignore' drops
-- it from the job's list. Once none is pending the job becomes ready, or
-- delayed by its own delay.
-- KEYS (src/keys.def; bound to these locals): ready, prio, delayed, stats,
--       cols, waiting, deps, dead, monitored, events, dedup, depsfin,
--       dependents
-- ARGV: 1 job name prefix, 2 wake channel, 3 dead cap, then per release:
--       the waiting job's id, the dependency's queue, its id, its outcome
-- Returns { code, more } per release: code 0 nothing changed (not waiting
-- for it, or counted already), 1 counted (others pending), 2 released
-- (ready or delayed), 3 buried by the policy 'fail'; more 1 when the job
-- buried has dependents of its own to release (the caller goes on with
-- them, deps_due.lua), else 0.
local prefix, wake = ARGV[1], ARGV[2]
local dead_max = tonumber(ARGV[3])
if not dead_max or #ARGV < 7 or (#ARGV - 3) % 4 ~= 0 then
  return redis.error_reply('ERR rjq deps_release: bad arguments')
end
local buries = false -- (only a dependency that did not complete can bury a job: policy 'fail')
for i = 7, #ARGV, 4 do
  if not DEPS.MARKS[ARGV[i]] then return redis.error_reply('ERR rjq deps_release: bad arguments') end
  if ARGV[i] ~= 'completed' then buries = true end
end
local J = columns(cols, prefix)
J.u, J.dp, J.df = dedup, deps, depsfin -- (a burial past the dead cap forgets the oldest dead: forget_jobs)
J.dt = dependents -- (a job buried with dependents of its own queue: their entries tell, notify_finished;
-- the dead cap's trim keeps the records of jobs with dependents to release: trim_oldest)
-- The keys written checked first (a wrongly typed one would fail a write
-- halfway): stats by int_fields' read; not the state and deps columns,
-- which DEPS.release reads (HMGET) before its first write, so a wrong type
-- there fails with nothing written and is named below (the options
-- column, which DEPS.release reads only for a list whose head has no
-- priority, one deps_add wrote before it put the priority there, is not
-- checked either); the
-- keys of a burial (dead set, error and watchers columns, dedup, and the
-- options column, which a burial past the dead cap reads after its first
-- writes: trim_oldest's forget_jobs) only when a release can bury (an
-- outcome other than 'completed'): 4 TYPE calls for a call of
-- completions, 9 for one that can bury, 11 before.
expect_types({ready, 'list', prio, 'zset', delayed, 'zset', waiting, 'zset'})
if buries then expect_types({J.e, 'hash', J.n, 'hash', dead, 'zset', J.u, 'zset', J.o, 'hash'}) end
int_fields(stats, 'seq', 'skipped', 'dead')
-- (the work: DEPS.release in lib.lua, which complete.lua and fail.lua call
-- for the dependents of their own queue)
local ok, out = pcall(DEPS.release, J, {ready = ready, prio = prio, delayed = delayed, stats = stats,
                                        waiting = waiting, deps = deps, dead = dead, wake = wake,
                                        dead_max = dead_max, emit = monitor(monitored, events)}, ARGV, 4)
if ok then return out end
if string.find(type(out) == 'table' and tostring(out.err) or tostring(out), 'WRONGTYPE', 1, true) then
  expect_types({J.s, 'hash', J.o, 'hash', deps, 'hash'})
end
error(out)
