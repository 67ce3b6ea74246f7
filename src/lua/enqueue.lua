-- enqueue: write job records and make them ready or delayed, atomically;
-- jobs made ready go straight to idle workers that registered free slots
-- (push_to_idle in lib.lua), else the doorbell rings.
-- KEYS: 1 ready, 2 prio, 3 delayed, 4 stats, 5 active, 6 idle,
--       7..13 the job columns, 14 monitored
-- ARGV: 1 job name prefix, 2 wake channel, 3 reply channel of an awaiting
--       producer ('' for none), 4 token base for pushed jobs (unique per
--       call), then per job: id ('' = assign the next number), payload,
--       options ('' = defaults, else "delay_ms,priority,max_attempts,backoff").
-- Returns { id1, existed1, id2, existed2, ... } in request order; an
-- existing id is reported (existed = 1) and not touched.
local ready, prio, delayed, stats, active, idle = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix, wake, ch, tbase = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local J = columns(7, prefix)
local FIRST = 5 -- ARGV index of the first job
local n = (#ARGV - FIRST + 1) / 3
expect_types({ready, 'list', prio, 'zset', delayed, 'zset', stats, 'hash',
              J.d, 'hash', J.s, 'hash', J.o, 'hash', J.n, 'hash'})
-- An idle worker to push to. Reading it also refuses a wrongly typed idle
-- hash before anything is written; active is only touched when there is one.
local idle_pick = redis.call('HRANDFIELD', idle, 1, 'WITHVALUES')
if #idle_pick > 0 then expect_types({active, 'zset'}) end

local seq = redis.call('HINCRBY', stats, 'seq', n) - n
local nothing_ready = redis.call('LLEN', ready) == 0 and
                      redis.call('ZCARD', prio) == 0

-- Ids given by the caller that exist already (or twice in this batch).
local given = {}
for i = FIRST, #ARGV, 3 do
  if ARGV[i] ~= '' then given[#given + 1] = ARGV[i] end
end
local taken = {}
if #given > 0 then
  local v = hmget(J.d, given)
  for i, id in ipairs(given) do if v[i] then taken[id] = true end end
end

local now, ring, became_ready = nil, false, 0
local emit = monitor(KEYS[14], prefix)
local out, plain, payloads, opts, watch, states = {}, {}, {}, {}, {}, {}
local added = 0

for i = FIRST, #ARGV, 3 do
  local id, payload, o = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  seq = seq + 1
  if id == '' then id = int(seq) end
  local existed = 0
  if taken[id] then
    existed = 1
  else
    taken[id] = true
    local delay, p = 0, 0
    if o ~= '' then
      local d_, p_, m_, b_ = string.match(o, '^(%d+),(%-?%d+),(%d+),(.*)$')
      delay, p = tonumber(d_), tonumber(p_)
      if p ~= 0 or tonumber(m_) ~= DEFAULT_MAX_ATTEMPTS or b_ ~= '' then
        if tonumber(m_) == DEFAULT_MAX_ATTEMPTS then m_ = '' end
        opts[#opts + 1] = id; opts[#opts + 1] = p_ .. ',' .. m_ .. ',' .. b_
      end
    end
    payloads[#payloads + 1] = id; payloads[#payloads + 1] = payload
    if ch ~= '' then watch[#watch + 1] = id; watch[#watch + 1] = ch end
    if delay > 0 then
      now = now or now_ms()
      states[#states + 1] = id; states[#states + 1] = state_value('delayed', 0)
      if push_delayed(delayed, id, now + delay) then ring = true end
    else
      if p == 0 then plain[#plain + 1] = id
      else redis.call('ZADD', prio, prio_score(p, seq), id) end
      became_ready = became_ready + 1
    end
    added = added + 1
    emit('enqueued', id)
  end
  out[#out + 1] = id
  out[#out + 1] = existed
end

if added > 0 then
  call_all('HSET', J.d, payloads, 2)
  if #opts > 0 then call_all('HSET', J.o, opts, 2) end
  if #watch > 0 then call_all('HSET', J.n, watch, 2) end
  if #states > 0 then call_all('HSET', J.s, states, 2) end
  if #plain > 0 then rpush_all(ready, plain) end
  redis.call('HINCRBY', stats, 'enqueued', added)
end
if became_ready > 0 then
  local pushed = push_to_idle(J, ready, prio, active, idle, tbase, became_ready, emit, idle_pick)
  -- jobs left ready in a queue that had nothing ready: wake idle workers
  if nothing_ready and pushed < became_ready then ring = true end
end
if ring then redis.call('PUBLISH', wake, '1') end
return out
