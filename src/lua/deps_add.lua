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
local nargv = #ARGV
-- Two passes over ARGV, no table per job and no per-job array kept
-- between them: the first checks every job's arguments (nothing is
-- written before all are good) and gathers the caller's ids; the second,
-- after the reads, builds the writes' arguments, the reply and the
-- registrations straight from ARGV.
local given, ng, nj, mine = {}, 0, 0, false
local i, last_opts = 2, nil
while i <= nargv do
  local id, opts, policy, n = ARGV[i], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4])
  if policy ~= 'fail' and policy ~= 'run' and policy ~= 'ignore' then
    return redis.error_reply('ERR rjq deps_add: bad policy')
  end
  if not n or n < 1 or i + 4 + 2 * n > nargv then
    return redis.error_reply('ERR rjq deps_add: no dependencies')
  end
  if opts ~= last_opts then
    if opts ~= '' then
      local d, _, _, _, debounce = job_options(opts)
      if not d or debounce then return redis.error_reply('ERR rjq deps_add: bad job options') end
    end
    last_opts = opts
  end
  local k = i + 5
  if not mine then
    for m = k, k + 2 * n - 2, 2 do if ARGV[m] == here then mine = true; break end end
  end
  if id ~= '' then ng = ng + 1; given[ng] = id end
  nj = nj + 1
  i = k + 2 * n
end
if nj == 0 then return redis.error_reply('ERR rjq deps_add: no dependencies') end
-- (the types checked before any write: stats's by int_fields' HMGET,
-- J.d's by the HMGET of the caller's ids when there are some, the others
-- by TYPE)
expect_types(ng > 0 and {J.s, 'hash', J.o, 'hash', waiting, 'zset', deps, 'hash'}
                      or {J.d, 'hash', J.s, 'hash', J.o, 'hash', waiting, 'zset', deps, 'hash'})
if mine then expect_types({dependents, 'hash'}) end -- (no watchers mark for those: DEPS.register)
int_fields(stats, 'seq') -- (the one counter written here)
-- which caller ids exist (one HMGET: `have`, usually empty); numbered
-- ids from one HINCRBY
local have, fresh = {}, nj
if ng > 0 then
  local p = hmget(J.d, given, 'hash')
  for m = 1, ng do if p[m] then have[given[m]] = true; fresh = fresh - 1 end end
end
local stamp = int(now_ms())
local waiting_v = state_value('waiting', '0', nil, stamp .. ',,')
local seq = fresh > 0 and redis.call('HINCRBY', stats, 'seq', fresh) - fresh or 0
local hp = mine and here .. ' '
-- The second pass: d, s, o, dp, w the writes' arguments, out the reply;
-- registrations with jobs of this queue (registered below, after the
-- writes): rid the dependency's id, ent its dependent's line
-- ("<queue> <id>"), rat the dependent's place in out (whose existed is 2
-- until one of them is found finished). A caller's id given twice in one
-- call is written once (the first; the later ones reported as existing):
-- `seen` (a table of the ids written) is kept only on the second build,
-- when the payload column's HSET added fewer fields than it had jobs (a
-- string key per job otherwise); every job not existing before takes a
-- number, so both builds number alike.
local function build(seen)
  local d, s, o, dp, w, out, rid, rat, ent = {}, {}, {}, {}, {}, {}, {}, {}, {}
  local nd, no, nout, nr, q = 0, 0, 0, 0, seq
  local lopts, lpol, head, stored, delay, prio = nil, nil, nil, false, 0, 0
  local i = 2
  while i <= nargv do
    local id, n = ARGV[i], tonumber(ARGV[i + 4])
    local k = i + 5
    if id ~= '' and have[id] then
      out[nout + 1] = id; out[nout + 2] = 1; nout = nout + 2
    else
      q = q + 1
      if id == '' then id = int(q) end
      if seen and seen[id] then
        out[nout + 1] = id; out[nout + 2] = 1; nout = nout + 2
      else
        if seen then seen[id] = true end
        local opts, policy = ARGV[i + 2], ARGV[i + 3]
        if opts ~= lopts then
          delay, prio, stored = 0, 0, false
          if opts ~= '' then delay, prio, stored = job_options(opts) end
          lopts, lpol = opts, nil
        end
        if policy ~= lpol then
          head = policy .. ' ' .. int(delay) .. ' ' .. int(prio)
          lpol = policy
        end
        local list
        if n == 1 then -- (the one-dependency path: one concatenation)
          list = head .. '\nw ' .. ARGV[k] .. ' ' .. ARGV[k + 1]
        else
          local lines = {head}
          for m = k, k + 2 * n - 2, 2 do lines[#lines + 1] = 'w ' .. ARGV[m] .. ' ' .. ARGV[m + 1] end
          list = table.concat(lines, '\n')
        end
        d[nd + 1] = id; d[nd + 2] = ARGV[i + 1]
        s[nd + 1] = id; s[nd + 2] = waiting_v
        dp[nd + 1] = id; dp[nd + 2] = list
        w[nd + 1] = stamp; w[nd + 2] = id
        nd = nd + 2
        if stored then o[no + 1] = id; o[no + 2] = stored; no = no + 2 end
        out[nout + 1] = id; out[nout + 2] = 0; nout = nout + 2
        if mine then
          for m = k, k + 2 * n - 2, 2 do
            if ARGV[m] == here then
              nr = nr + 1
              rid[nr] = ARGV[m + 1]; rat[nr] = nout; ent[nr] = hp .. id
              out[nout] = 2
            end
          end
        end
      end
    end
    i = k + 2 * n
  end
  return d, s, o, dp, w, out, rid, rat, ent, nd, no, nr
end
local d, s, o, dp, w, out, rid, rat, ent, nd, no, nr = build(nil)
if nd > 0 then
  -- (the payload column's HSET: how many fields it added tells whether
  -- an id came twice; then built again, once each, the first's payload
  -- written over the later's)
  local added = 0
  for c = 1, nd, 2 * CHUNK do
    added = added + redis.call('HSET', J.d, unpack(d, c, math.min(c + 2 * CHUNK - 1, nd)))
  end
  if added * 2 < nd then
    d, s, o, dp, w, out, rid, rat, ent, nd, no, nr = build({})
    call_all('HSET', J.d, d, 2)
  end
  call_all('HSET', J.s, s, 2)
  if no > 0 then call_all('HSET', J.o, o, 2) end
  -- (a call of TABLE_MIN jobs or more makes the deps hash and the waiting
  -- set tables before it writes them, as a pin would: TABLE_PIN written
  -- first and deleted after, in this call; lib.lua)
  local big = nd >= 2 * TABLE_MIN
  if big then
    redis.call('HSET', deps, TABLE_PIN, '')
    redis.call('ZADD', waiting, stamp, TABLE_PIN)
  end
  call_all('HSET', deps, dp, 2)
  call_all('ZADD', waiting, w, 2)
  if big then
    redis.call('HDEL', deps, TABLE_PIN)
    redis.call('ZREM', waiting, TABLE_PIN)
  end
end
-- The registrations with jobs of this queue (DEPS.register_ids,
-- lib.lua), read after the writes (a dependency enqueued in this call
-- reads waiting): a finished or missing dependency leaves its dependent's
-- existed 0 (the client counts it: deps_release.lua), an unfinished one
-- records the dependent in its dependents entry.
if nr > 0 then
  local got = DEPS.register_ids(J, dependents, rid, ent)
  for r = 1, nr do if got[r] ~= 'waiting' then out[rat[r]] = 0 end end
end
return out
