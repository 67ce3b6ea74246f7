-- rjq shared helpers: prepended to every script at build time
-- (cmake/embed_lua.cmake), so each script stays one atomic transition.
--
-- Keys of queue Q all share the hash tag {Q}: <prefix>:{Q}:<name>.
--   ready    list  ids of priority 0, FIFO
--   prio     zset  ids of other priorities; score = -priority*2^32 + seq
--   delayed  zset  id -> due time (ms, server clock); also retries
--   active   zset  id -> lease deadline (ms)
--   dead     zset  id -> time of death
--   completed zset id -> completion time (capped history)
--   stats    hash  counters, and seq (the id/sequence counter)
--   monitored string present while a monitor listens (TTL refreshed)
--   events   channel of queue events for monitors
--   job:<id> hash  d payload, s state, a attempts started, m max attempts
--                  (absent = DEFAULT_MAX_ATTEMPTS),
--                  p priority (absent = 0), b backoff "kind,base,max"
--                  (absent = default), t token of the current claim,
--                  r result, e last error, f token of the claim whose
--                  failure was applied last, n reply channels of the
--                  producers awaiting it (space-separated)
-- Job keys are <prefix>:{Q}:job:<id>; scripts build them from the prefix
-- passed in ARGV[1] (same hash slot as every declared key).

local PRIO_SHIFT = 4294967296
local DEFAULT_MAX_ATTEMPTS = 3 -- also RJQ's C default; not stored per job

-- A job's max attempts from its 'm' field (absent: the default).
local function max_attempts(m)
  return tonumber(m or DEFAULT_MAX_ATTEMPTS)
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integral numbers as exact decimal strings (tostring() would switch to
-- exponent notation past 1e14).
local function int(x)
  return string.format('%d', x)
end

-- Refuse, before anything is written, keys that hold the wrong type.
-- spec = { key, type, key, type, ... }
local function expect_types(spec)
  for i = 1, #spec, 2 do
    local t = redis.call('TYPE', spec[i])['ok']
    if t ~= 'none' and t ~= spec[i + 1] then
      error({err = 'WRONGTYPE ' .. spec[i] .. ' holds a ' .. t ..
                   ', rjq expects a ' .. spec[i + 1]})
    end
  end
end

local function prio_score(p, seq)
  return int(-p * PRIO_SHIFT + (seq % PRIO_SHIFT))
end

-- Make job `id` (priority p) ready. head puts it first in its class.
-- Rings the doorbell when the queue had nothing ready, so a backlog costs
-- no publishes and an idle worker always hears about new work.
local function push_ready(ready, prio, stats, wake, id, p, head)
  if p == 0 then
    local n
    if head then n = redis.call('LPUSH', ready, id)
    else n = redis.call('RPUSH', ready, id) end
    if n == 1 and redis.call('ZCARD', prio) == 0 then
      redis.call('PUBLISH', wake, '1')
    end
  else
    local seq = 0
    if not head then seq = redis.call('HINCRBY', stats, 'seq', 1) end
    redis.call('ZADD', prio, prio_score(p, seq), id)
    if redis.call('ZCARD', prio) == 1 and redis.call('LLEN', ready) == 0 then
      redis.call('PUBLISH', wake, '1')
    end
  end
end

-- Schedule `id` at `due`. Returns true when it became the earliest: the
-- caller then rings the doorbell (once per script), so idle workers re-arm
-- their timer for it.
local function push_delayed(delayed, id, due)
  redis.call('ZADD', delayed, int(due), id)
  return redis.call('ZRANGE', delayed, 0, 0)[1] == id
end

-- Delay before the next attempt. spec is "e,base,max" (exponential with
-- jitter in [d/2, d]) or "f,base,0" (fixed); nil means exponential 1 s..1 h.
local function backoff_ms(spec, attempt, jitter)
  local kind, base, cap = 'e', 1000, 3600000
  if spec then
    local k, b, c = string.match(spec, '^(%a),(%d+),(%d+)$')
    if k then kind, base, cap = k, tonumber(b), tonumber(c) end
  end
  if kind == 'f' then return base end
  if attempt < 1 then attempt = 1 end
  local d = base * 2 ^ (attempt - 1)
  if d > cap then d = cap end
  return math.floor(d / 2 + (d / 2) * jitter)
end

-- Results up to this size travel in the completion message; larger ones
-- are announced as 'big' and the awaiting client fetches them once.
local INLINE_RESULT_MAX = 65536

-- Publish an outcome ('completed', 'dead', 'progress') of job key k to
-- every reply channel in chs. Message: kind \n job key \n body.
local function notify(chs, k, kind, body)
  if not chs or chs == '' then return end
  if kind == 'completed' and #body > INLINE_RESULT_MAX then
    kind, body = 'big', ''
  end
  local msg = kind .. '\n' .. k .. '\n' .. body
  for ch in string.gmatch(chs, '%S+') do redis.call('PUBLISH', ch, msg) end
end

-- Queue events for monitors: published on <base>events only while a
-- monitor holds <base>monitored, so when nobody listens a script pays one
-- EXISTS per call, not a PUBLISH per job. Returns emit(event, id).
local function monitor(prefix)
  local base = string.sub(prefix, 1, -5) -- strip 'job:'
  if redis.call('EXISTS', base .. 'monitored') == 1 then
    local ch = base .. 'events'
    return function(ev, id) redis.call('PUBLISH', ch, ev .. ' ' .. id) end
  end
  return function() end
end

-- Move job `id` (hash k) to the dead set with error text err; drop the
-- oldest dead jobs (and their hashes) beyond dead_max.
local function bury(dead, stats, prefix, k, id, now, err, dead_max, emit)
  redis.call('ZADD', dead, int(now), id)
  emit('dead', id)
  redis.call('HSET', k, 's', 'dead', 'e', err)
  redis.call('HINCRBY', stats, 'dead', 1)
  notify(redis.call('HGET', k, 'n'), k, 'dead', err)
  local extra = redis.call('ZCARD', dead) - dead_max
  if extra > 0 then
    local old = redis.call('ZRANGE', dead, 0, extra - 1)
    for _, o in ipairs(old) do redis.call('DEL', prefix .. o) end
    redis.call('ZREMRANGEBYRANK', dead, 0, extra - 1)
  end
end

-- Push ids (priority 0) to the tail of ready in chunks (Lua's unpack limit).
local function rpush_all(ready, ids)
  for i = 1, #ids, 1000 do
    redis.call('RPUSH', ready, unpack(ids, i, math.min(i + 999, #ids)))
  end
end

