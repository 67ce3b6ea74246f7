-- deps_add: enqueue jobs that wait for other jobs (their dependencies,
-- rjq.h "Dependencies"), those of one client's loop turn on this queue
-- together (deps.c gathers them). Each job is written in state "waiting"
-- (listed in the waiting set, id -> enqueue time) with its list of
-- dependencies, each pending; it becomes ready (or delayed by its own
-- delay) once deps_release.lua has counted every one of them. Only this
-- queue's slot is touched: the client then registers the jobs with their
-- dependencies' queues (deps_watch.lua, a call per dependency's queue),
-- but a dependency of this queue is registered here (DEPS.register_ids,
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
-- (per job, flat: its id, the index of its payload, its stored options,
-- its list, the index of its first dependency and their number; no table
-- per job. The options text and head of the job before are reused when
-- its options are the same: a client's jobs mostly share them.)
local jid, jat, jst, jlist, jfirst, jn = {}, {}, {}, {}, {}, {}
local nj, i, mine = 0, 2, false
local last_opts, last_pol, head, stored = nil, nil, nil, false
local delay, prio = 0, 0
local nargv = #ARGV
while i <= nargv do
  local id, opts, policy, n = ARGV[i], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4])
  if policy ~= 'fail' and policy ~= 'run' and policy ~= 'ignore' then
    return redis.error_reply('ERR rjq deps_add: bad policy')
  end
  if not n or n < 1 or i + 4 + 2 * n > nargv then
    return redis.error_reply('ERR rjq deps_add: no dependencies')
  end
  if opts ~= last_opts then
    delay, prio, stored = 0, 0, false
    if opts ~= '' then
      local d, p, s, _, debounce = job_options(opts)
      if not d or debounce then return redis.error_reply('ERR rjq deps_add: bad job options') end
      delay, prio, stored = d, p, s
    end
    last_opts, last_pol = opts, nil
  end
  if policy ~= last_pol then
    head = policy .. ' ' .. int(delay) .. ' ' .. int(prio)
    last_pol = policy
  end
  local k = i + 5
  local list
  if n == 1 then -- (the one-dependency path: one concatenation)
    list = head .. '\nw ' .. ARGV[k] .. ' ' .. ARGV[k + 1]
    if ARGV[k] == here then mine = true end
  else
    local lines = {head}
    for m = k, i + 4 + 2 * n, 2 do
      lines[#lines + 1] = 'w ' .. ARGV[m] .. ' ' .. ARGV[m + 1]
      if ARGV[m] == here then mine = true end
    end
    list = table.concat(lines, '\n')
  end
  nj = nj + 1
  jid[nj], jat[nj], jst[nj], jlist[nj], jfirst[nj], jn[nj] = id, i + 1, stored, list, k, n
  i = k + 2 * n
end
if nj == 0 then return redis.error_reply('ERR rjq deps_add: no dependencies') end
-- (the types checked before any write: stats's by int_fields' HMGET,
-- J.d's by the HMGET of the caller's ids when there are some, the others
-- by TYPE)
local given, ng = {}, 0
for m = 1, nj do if jid[m] ~= '' then ng = ng + 1; given[ng] = jid[m] end end
expect_types(ng > 0 and {J.s, 'hash', J.o, 'hash', waiting, 'zset', deps, 'hash'}
                      or {J.d, 'hash', J.s, 'hash', J.o, 'hash', waiting, 'zset', deps, 'hash'})
if mine then expect_types({dependents, 'hash'}) end -- (no watchers mark for those: DEPS.register)
int_fields(stats, 'seq') -- (the one counter written here)
-- which caller ids exist (one HMGET); numbered ids from one HINCRBY
local have = {}
if ng > 0 then
  local p = hmget(J.d, given, 'hash')
  for m = 1, ng do if p[m] then have[given[m]] = true end end
end
local fresh = 0
for m = 1, nj do if jid[m] == '' or not have[jid[m]] then fresh = fresh + 1 end end
local stamp = int(now_ms())
local waiting_v = state_value('waiting', '0', nil, stamp .. ',,')
local seq = fresh > 0 and redis.call('HINCRBY', stats, 'seq', fresh) - fresh or 0
local d, s, o, dp, w, out = {}, {}, {}, {}, {}, {}
local nd, no, nout = 0, 0, 0
-- registrations with jobs of this queue (registered below, after the
-- writes): rid the dependency's id, rat its dependent's place in out
-- (whose existed is 2 until one of them is found finished; its id is
-- the one before it there)
local rid, rat, nr = {}, {}, 0
for m = 1, nj do
  local id = jid[m]
  if id ~= '' and have[id] then
    out[nout + 1] = id; out[nout + 2] = 1; nout = nout + 2
  else
    seq = seq + 1
    if id == '' then id = int(seq) end
    have[id] = true -- (a caller's id twice in one call: written once)
    d[nd + 1] = id; d[nd + 2] = ARGV[jat[m]]
    s[nd + 1] = id; s[nd + 2] = waiting_v
    dp[nd + 1] = id; dp[nd + 2] = jlist[m]
    w[nd + 1] = stamp; w[nd + 2] = id
    nd = nd + 2
    if jst[m] then o[no + 1] = id; o[no + 2] = jst[m]; no = no + 2 end
    out[nout + 1] = id; out[nout + 2] = 0; nout = nout + 2
    if mine then
      local k = jfirst[m]
      for q = k, k + 2 * jn[m] - 1, 2 do
        if ARGV[q] == here then
          nr = nr + 1
          rid[nr] = ARGV[q + 1]; rat[nr] = nout
          out[nout] = 2
        end
      end
    end
  end
end
if nd > 0 then
  call_all('HSET', J.d, d, 2)
  call_all('HSET', J.s, s, 2)
  if no > 0 then call_all('HSET', J.o, o, 2) end
  call_all('HSET', deps, dp, 2)
  call_all('ZADD', waiting, w, 2)
end
-- The registrations with jobs of this queue (DEPS.register_ids,
-- lib.lua), read after the writes (a dependency enqueued in this call
-- reads waiting): a finished or missing dependency leaves its dependent's
-- existed 0 (the client counts it: deps_release.lua), an unfinished one
-- records the dependent in its dependents entry.
if nr > 0 then
  local entries, hp = {}, here .. ' '
  for r = 1, nr do entries[r] = hp .. out[rat[r] - 1] end -- ("<queue> <dependent's id>")
  local got = DEPS.register_ids(J, dependents, rid, entries)
  for r = 1, nr do if got[r] ~= 'waiting' then out[rat[r]] = 0 end end
end
return out
