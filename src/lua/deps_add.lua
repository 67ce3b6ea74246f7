-- deps_add: enqueue jobs that wait for other jobs (their dependencies,
-- rjq.h "Dependencies"), those of one client's loop turn on this queue
-- together (deps.c gathers them). Each job is written in state "waiting"
-- (listed in the waiting set, id -> enqueue time) with its list of
-- dependencies, each pending; it becomes ready (or delayed by its own
-- delay) once deps_release.lua has counted every one of them. Only this
-- queue's slot is touched: the client then registers the jobs with their
-- dependencies' queues (deps_watch.lua, a call per dependency's queue),
-- but a dependency of this queue is registered here (DEPS.register,
-- lib.lua: its finishing script then releases the job in its own call).
-- KEYS (src/keys.def; bound to these locals): stats, cols, waiting, deps,
--       dependents
-- ARGV: 1 job name prefix (of this queue), then per job: its id ('' =
--       assign the next number), payload, options
--       ('' = defaults, else as enqueue.lua takes them), policy ('fail',
--       'run' or 'ignore'), the number n of its dependencies, then n
--       times: the dependency's queue, its id.
-- The dependencies column value: "<policy> <delay ms> <priority>", then a
-- line per dependency "<mark> <queue> <id>", mark 'w' while it is pending,
-- else how it ended: 'c' completed, 'd' dead, 'x' cancelled, 'm' missing
-- (no such job), '-' dropped by the policy 'ignore' (names and ids have no
-- blanks: src/validate.c). The release that makes the job ready or delayed
-- when its last dependency completed writes no marks (DEPS.release): a job
-- out of the waiting state whose head has the priority and no " h" (held:
-- it left waiting otherwise, buried by its policy or cancelled) reads its
-- 'w' lines as 'c' (deps_read.lua). A head without the priority (written
-- before it had one) has every mark written.
-- Returns { id, existed } per job: an id that exists is reported
-- (existed = 1) and nothing of that job is written; existed = 2: written,
-- and registered here with each of its dependencies of this queue, all
-- unfinished (the client registers only the others; 0: it registers all,
-- and counts those that had finished). Bad arguments are refused before
-- any write.
local J = columns(cols, ARGV[1])
local here = DEPS.queue(J)
local jobs, i, mine = {}, 2, false
while i <= #ARGV do
  local id, payload, opts, policy, n = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4])
  if policy ~= 'fail' and policy ~= 'run' and policy ~= 'ignore' then
    return redis.error_reply('ERR rjq deps_add: bad policy')
  end
  if not n or n < 1 or i + 4 + 2 * n > #ARGV then
    return redis.error_reply('ERR rjq deps_add: no dependencies')
  end
  local delay, prio, stored = 0, 0, false
  if opts ~= '' then
    local d, p, s, _, debounce = job_options(opts)
    if not d or debounce then return redis.error_reply('ERR rjq deps_add: bad job options') end
    delay, prio, stored = d, p, s
  end
  local lines = {policy .. ' ' .. int(delay) .. ' ' .. int(prio)}
  for k = i + 5, i + 4 + 2 * n, 2 do
    lines[#lines + 1] = 'w ' .. ARGV[k] .. ' ' .. ARGV[k + 1]
    if ARGV[k] == here then mine = true end
  end
  jobs[#jobs + 1] = {id, payload, stored, table.concat(lines, '\n'), i + 5, n}
  i = i + 5 + 2 * n
end
if #jobs == 0 then return redis.error_reply('ERR rjq deps_add: no dependencies') end
expect_types({stats, 'hash', J.d, 'hash', J.s, 'hash', J.o, 'hash', waiting, 'zset', deps, 'hash'})
if mine then expect_types({dependents, 'hash'}) end -- (no watchers mark for those: DEPS.register)
int_fields(stats, 'seq', 'skipped')
-- which caller ids exist (one HMGET); numbered ids from one HINCRBY
local given = {}
for _, j in ipairs(jobs) do if j[1] ~= '' then given[#given + 1] = j[1] end end
local have = {}
if #given > 0 then
  local p = hmget(J.d, given)
  for k, id in ipairs(given) do if p[k] then have[id] = true end end
end
local fresh = 0
for _, j in ipairs(jobs) do if j[1] == '' or not have[j[1]] then fresh = fresh + 1 end end
local stamp = int(now_ms())
local waiting_v = state_value('waiting', '0', nil, stamp .. ',,')
local seq = fresh > 0 and redis.call('HINCRBY', stats, 'seq', fresh) - fresh or 0
local d, s, o, dp, w, out = {}, {}, {}, {}, {}, {}
local regs, of = {}, {} -- registrations with jobs of this queue; of: their job's place in out
for _, j in ipairs(jobs) do
  local id = j[1]
  if id ~= '' and have[id] then
    out[#out + 1] = id; out[#out + 1] = 1
  else
    seq = seq + 1
    if id == '' then id = int(seq) end
    have[id] = true -- (a caller's id twice in one call: written once)
    d[#d + 1] = id; d[#d + 1] = j[2]
    s[#s + 1] = id; s[#s + 1] = waiting_v
    if j[3] then o[#o + 1] = id; o[#o + 1] = j[3] end
    dp[#dp + 1] = id; dp[#dp + 1] = j[4]
    w[#w + 1] = stamp; w[#w + 1] = id
    out[#out + 1] = id; out[#out + 1] = 0
    for k = j[5], j[5] + 2 * j[6] - 1, 2 do
      if mine and ARGV[k] == here then
        regs[#regs + 1] = ARGV[k + 1]; regs[#regs + 1] = here; regs[#regs + 1] = id
        of[#of + 1] = #out
      end
    end
  end
end
if #d > 0 then
  call_all('HSET', J.d, d, 2)
  call_all('HSET', J.s, s, 2)
  if #o > 0 then call_all('HSET', J.o, o, 2) end
  call_all('HSET', deps, dp, 2)
  call_all('ZADD', waiting, w, 2)
end
if #regs > 0 then
  local r, all = DEPS.register(J, dependents, regs), {}
  for m, at in ipairs(of) do all[at] = all[at] ~= false and r[m] == 'waiting' end
  for at, yes in pairs(all) do if yes then out[at] = 2 end end
end
return out
