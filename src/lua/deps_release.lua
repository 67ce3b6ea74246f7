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
--       cols, waiting, deps, dead, monitored, events, dedup, depsfin
-- ARGV: 1 job name prefix, 2 wake channel, 3 dead cap, then per release:
--       the waiting job's id, the dependency's queue, its id, its outcome
-- Returns { code, more } per release: code 0 nothing changed (not waiting
-- for it, or counted already), 1 counted (others pending), 2 released
-- (ready or delayed), 3 buried by the policy 'fail'; more 1 when the job
-- buried has dependents of its own to release (the caller goes on with
-- them, deps_due.lua), else 0.
local prefix, wake = ARGV[1], ARGV[2]
local dead_max = tonumber(ARGV[3])
local MARKS = {completed = 'c', dead = 'd', cancelled = 'x', missing = 'm'}
if not dead_max or #ARGV < 7 or (#ARGV - 3) % 4 ~= 0 then
  return redis.error_reply('ERR rjq deps_release: bad arguments')
end
for i = 7, #ARGV, 4 do
  if not MARKS[ARGV[i]] then return redis.error_reply('ERR rjq deps_release: bad arguments') end
end
local J = columns(cols, prefix)
J.u, J.dp, J.df = dedup, deps, depsfin -- (a burial past the dead cap forgets the oldest dead: forget_jobs)
expect_types({ready, 'list', prio, 'zset', delayed, 'zset', stats, 'hash', J.s, 'hash', J.e, 'hash',
              J.n, 'hash', waiting, 'zset', deps, 'hash', dead, 'zset', J.u, 'zset'})
int_fields(stats, 'seq', 'skipped', 'dead')
local emit = monitor(monitored, events)

-- What the call reads, once for all its releases (a job released twice in
-- one call sees its first release: these are kept up to date): the state
-- (S), options (O) and dependencies (L) of each job; the writes of jobs
-- counted or released go at the end, a command each (dirty: the jobs
-- whose list changed, in order; st: their new states; rpush: the jobs
-- made ready with priority 0, in order).
local uniq, S, O, L = {}, {}, {}, {}
for i = 4, #ARGV, 4 do
  if S[ARGV[i]] == nil then uniq[#uniq + 1] = ARGV[i]; S[ARGV[i]] = false end
end
do
  local sv, ov, lv = hmget(J.s, uniq), hmget_sparse(J.o, uniq), hmget(deps, uniq)
  for k, id in ipairs(uniq) do S[id] = sv[k]; O[id] = ov[k]; L[id] = lv[k] end
end
local dirty, is_dirty, st, gone, rpush = {}, {}, {}, {}, {}

local function release(id, dq, did, outcome)
  local mark = MARKS[outcome]
  local list = L[id]
  local state, attempts, _, tm = state_text(S[id] or nil)
  if not S[id] or state ~= 'waiting' or not list then return 0, 0 end
  local entry = ' ' .. dq .. ' ' .. did
  local head, at = string.match(list, '^([^\n]*)\n()')
  if not head then return 0, 0 end
  local policy, delay = string.match(head, '^(%a+) (%d+)$')
  local lines, found, pending = {head}, false, 0
  for line in string.gmatch(string.sub(list, at), '[^\n]+') do
    if line == 'w' .. entry then -- (every line of it: a dependency listed twice)
      found = true
      if mark ~= 'c' and policy == 'ignore' then line = '-' .. entry else line = mark .. entry end
    elseif string.sub(line, 1, 1) == 'w' then
      pending = pending + 1
    end
    lines[#lines + 1] = line
  end
  if not found then return 0, 0 end
  L[id] = table.concat(lines, '\n')
  if mark ~= 'c' and policy == 'fail' then
    redis.call('HSET', deps, id, L[id])
    is_dirty[id] = nil
    S[id] = false
    gone[#gone + 1] = id
    DEPS_TOLD[1] = false
    bury(J, dead, stats, id, tonumber(attempts), now_ms(),
         'dependency ' .. dq .. ':' .. did .. (outcome == 'missing' and ' was removed (no record of it)'
                                                or ' ended ' .. outcome), dead_max, emit, nil, tm)
    return 3, DEPS_TOLD[1] and 1 or 0
  end
  if not is_dirty[id] then is_dirty[id] = true; dirty[#dirty + 1] = id end
  if pending > 0 then return 1, 0 end
  gone[#gone + 1] = id
  delay = tonumber(delay) or 0
  if delay > 0 then
    S[id] = state_value('delayed', attempts, nil, tm)
    st[#st + 1] = id; st[#st + 1] = S[id]
    if push_delayed(delayed, id, now_ms() + delay) then redis.call(PUB or pub_mode(), wake, '1') end
  else
    S[id] = state_value('ready', attempts, nil, tm)
    st[#st + 1] = id; st[#st + 1] = S[id]
    local p = (parse_options(O[id]))
    if p == 0 then rpush[#rpush + 1] = id else push_ready(ready, prio, stats, wake, id, p, false) end
  end
  return 2, 0
end

local out = {}
for i = 4, #ARGV, 4 do
  local code, more = release(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
  out[#out + 1] = code
  out[#out + 1] = more
end
local fv = {}
for _, id in ipairs(dirty) do
  if is_dirty[id] then fv[#fv + 1] = id; fv[#fv + 1] = L[id] end
end
if #fv > 0 then call_all('HSET', deps, fv, 2) end
if #st > 0 then call_all('HSET', J.s, st, 2) end
if #gone > 0 then call_all('ZREM', waiting, gone) end
if #rpush > 0 then
  -- (as push_ready: the doorbell when the queue had nothing ready)
  local n = 0
  for i = 1, #rpush, CHUNK do n = redis.call('RPUSH', ready, unpack(rpush, i, math.min(i + CHUNK - 1, #rpush))) end
  if n == #rpush and redis.call('ZCARD', prio) == 0 then redis.call(PUB or pub_mode(), wake, '1') end
end
return out
