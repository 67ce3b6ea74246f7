-- fail: a claimed job failed. Retry after backoff while attempts remain,
-- else (or when fatal) move it to dead. Checked against the fencing token.
-- A job with a timeout whose run time is over (deadlines, see start_jobs
-- in lib.lua) is refused as lease lost, as complete.lua refuses it, and
-- nothing changes: the reclaim sweep fails it as timed out (that is the
-- attempt's outcome, whatever the late failure said).
-- KEYS (src/keys.def; bound to these locals): active, ready, prio, delayed,
--       dead, stats, cols, monitored, events, dedup, deadlines, groups, deps,
--       depsfin, waiting, dependents
-- ARGV: 1 job name prefix, 2 wake channel, 3 id, 4 token, 5 error text,
--       6 fatal (0/1), 7 retry delay ms (-1: the job's backoff),
--       8 jitter in [0,1), 9 dead cap
-- Returns 0 lease lost (or its run time is over), 1 retry scheduled, 2
-- dead, 3 already failed with this token (a retried call whose first
-- reply was lost), 4 cancelled (cancel.lua); or, dead with dependents of
-- other queues to release, { 5, then per job with some, its id and its
-- dependents entry ("<queue> <id>" lines, deps_watch.lua) }: the job's,
-- and those of the jobs its death buried here by their policy 'fail'
-- (all dead), which the client releases (deps.c: no deps_due.lua call).
-- Those waiting in this queue are counted by this call (DEPS.finished in
-- lib.lua).
local prefix, wake, id, tok, err = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local fatal, delay, jitter, dead_max = ARGV[6] == '1', tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local J = columns(cols, prefix)
J.u = dedup
J.df = depsfin -- (a job buried with dependents is indexed for the sweep: notify_finished)
J.dp = deps -- (forget_jobs past the dead cap: its HDEL refuses a wrongly typed key, as the columns' do)
expect_types({active, 'zset', ready, 'list', prio, 'zset', delayed, 'zset', dead, 'zset', stats, 'hash',
              J.s, 'hash', J.e, 'hash', J.f, 'hash', J.u, 'zset', J.a, 'hash'})
local v = fields(J, id, 's', 'o', 'f')
local state, attempts, t, tm = state_of(v[1])
if state ~= 'active' or t ~= tok then
  -- failtoken is the token of the claim whose failure was applied last: a
  -- call re-sent after a lost reply is recognised even if the job moved on
  if v[3] == tok then return 3 end
  if state == 'cancelled' and t == tok then return 4 end
  return 0
end

-- the counters fail_job may count (a priority job retried at once takes a
-- sequence number), checked before the first write
int_fields(stats, 'failed', 'retried', 'dead', 'seq', 'skipped')
local now = now_ms()
if select(4, parse_options(v[2])) then -- a timeout: its run time's end
  local e = typed('zset', 'ZSCORE', deadlines, id)
  if e and tonumber(e) <= now then return 0 end
end
local q = {ready = ready, prio = prio, delayed = delayed, dead = dead, stats = stats, wake = wake, now = now,
           jitter = jitter, dead_max = dead_max,
           emit = monitor_and_dependents(J, monitored, events, dependents)} -- (J.dt: notify_finished)
channels_out(J, {id}, v) -- (format 2: a channel in the state goes to the watchers first)
redis.call('ZREM', active, id)
-- a job of a group: its slot is freed, a retry waits in its group
-- (README "Groups", groups_lib.lua)
local gc, g = {}, nil
if GROUPS.hinted(v[2]) then g = GROUPS.release(groups, J, {id}, gc)[id] end
if g then q = GROUPS.q(groups, q, g) end
DEPS_TOLD[1] = false
local r, st = fail_job(J, q, id, tok, attempts, v[2], err, fatal, delay, tm)
if g then GROUPS.after(groups, J, {{g, id, st}}, gc, stats) end
if r == 2 and DEPS_TOLD[1] then
  local left, buried = DEPS.finished(J, {ready = ready, prio = prio, delayed = delayed, stats = stats, waiting = waiting,
                                 deps = deps, dead = dead, dependents = dependents, depsfin = depsfin, wake = wake,
                                 dead_max = dead_max, emit = q.emit}, {id}, 'dead')
  local out = left[2] ~= '' and {5, id, left[2]} or {5}
  for i = 1, #buried do out[#out + 1] = buried[i] end
  return #out > 1 and out or 2
end
return r
