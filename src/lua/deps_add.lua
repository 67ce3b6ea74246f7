-- deps_add: enqueue a job that waits for other jobs (its dependencies,
-- rjq.h "Dependencies"). The job is written in state "waiting" (listed in
-- the waiting set, id -> enqueue time) with its list of dependencies, each
-- pending; it becomes ready (or delayed by its own delay) once
-- deps_release.lua has counted every one of them. Only this queue's slot
-- is touched: the client then registers the job with each dependency's
-- queue (deps_watch.lua), a separate call on that queue.
-- KEYS (src/keys.def; bound to these locals): stats, cols, waiting, deps
-- ARGV: 1 id ('' = assign the next number), 2 payload, 3 options ('' =
--       defaults, else as enqueue.lua takes them), 4 policy ('fail',
--       'run' or 'ignore'), then per dependency: its queue, its id.
-- The dependencies column value: "<policy> <delay ms>", then a line per
-- dependency "<mark> <queue> <id>", mark 'w' while it is pending, else how
-- it ended: 'c' completed, 'd' dead, 'x' cancelled, 'm' missing (no such
-- job), '-' dropped by the policy 'ignore' (names and ids have no blanks:
-- src/validate.c).
-- Returns { id, existed }: an id that exists is reported (existed = 1)
-- and nothing is written.
local id, payload, opts, policy = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local J = columns(cols)
if policy ~= 'fail' and policy ~= 'run' and policy ~= 'ignore' then
  return redis.error_reply('ERR rjq deps_add: bad policy')
end
local delay, stored = 0, false
if opts ~= '' then
  local d, _, s, _, debounce = job_options(opts)
  if not d or debounce then return redis.error_reply('ERR rjq deps_add: bad job options') end
  delay, stored = d, s
end
if #ARGV < 6 or #ARGV % 2 ~= 0 then return redis.error_reply('ERR rjq deps_add: no dependencies') end
expect_types({stats, 'hash', J.d, 'hash', J.s, 'hash', J.o, 'hash', waiting, 'zset', deps, 'hash'})
int_fields(stats, 'seq', 'skipped')
if id ~= '' and redis.call('HEXISTS', J.d, id) == 1 then return {id, 1} end
local seq = redis.call('HINCRBY', stats, 'seq', 1)
if id == '' then id = int(seq) end
local t = now_ms()
local stamp = int(t)
local lines = {policy .. ' ' .. int(delay)}
for i = 5, #ARGV, 2 do lines[#lines + 1] = 'w ' .. ARGV[i] .. ' ' .. ARGV[i + 1] end
redis.call('HSET', J.d, id, payload)
redis.call('HSET', J.s, id, state_value('waiting', '0', nil, stamp .. ',,'))
if stored then redis.call('HSET', J.o, id, stored) end
redis.call('HSET', deps, id, table.concat(lines, '\n'))
redis.call('ZADD', waiting, stamp, id)
return {id, 0}
