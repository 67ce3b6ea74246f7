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
--       cols, waiting, deps, dead, monitored, events, dedup
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
J.u, J.dp = dedup, deps -- (a burial past the dead cap forgets the oldest dead: forget_jobs)
expect_types({ready, 'list', prio, 'zset', delayed, 'zset', stats, 'hash', J.s, 'hash', J.e, 'hash',
              J.n, 'hash', waiting, 'zset', deps, 'hash', dead, 'zset', J.u, 'zset'})
int_fields(stats, 'seq', 'skipped', 'dead')
local emit = monitor(monitored, events)

local function release(id, dq, did, outcome)
  local mark = MARKS[outcome]
  local v = fields(J, id, 's', 'o')
  local list = redis.call('HMGET', deps, id)[1]
  local state, attempts, _, tm = state_text(v[1])
  if state ~= 'waiting' or not list then return 0, 0 end
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
  if mark ~= 'c' and policy == 'fail' then
    redis.call('HSET', deps, id, table.concat(lines, '\n'))
    redis.call('ZREM', waiting, id)
    DEPS_TOLD[1] = false
    bury(J, dead, stats, id, tonumber(attempts), now_ms(),
         'dependency ' .. dq .. ':' .. did .. ' ended ' .. outcome, dead_max, emit, nil, tm)
    return 3, DEPS_TOLD[1] and 1 or 0
  end
  redis.call('HSET', deps, id, table.concat(lines, '\n'))
  if pending > 0 then return 1, 0 end
  redis.call('ZREM', waiting, id)
  delay = tonumber(delay) or 0
  if delay > 0 then
    redis.call('HSET', J.s, id, state_value('delayed', attempts, nil, tm))
    if push_delayed(delayed, id, now_ms() + delay) then redis.call(PUB or pub_mode(), wake, '1') end
  else
    redis.call('HSET', J.s, id, state_value('ready', attempts, nil, tm))
    push_ready(ready, prio, stats, wake, id, (parse_options(v[2])), false)
  end
  return 2, 0
end

local out = {}
for i = 4, #ARGV, 4 do
  local code, more = release(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
  out[#out + 1] = code
  out[#out + 1] = more
end
return out
