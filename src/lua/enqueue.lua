-- enqueue: write job hashes and make them ready or delayed, atomically.
-- KEYS: 1 ready, 2 prio, 3 delayed, 4 stats
-- ARGV: 1 job key prefix, 2 wake channel, 3 reply channel of an awaiting
--       producer ('' for none),
--       then per job: id ('' = assign the next number), payload, options
--       ('' = defaults, else "delay_ms,priority,max_attempts,backoff").
-- Returns { id1, existed1, id2, existed2, ... } in request order; an
-- existing id is reported (existed = 1) and not touched.
local ready, prio, delayed, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, wake, ch = ARGV[1], ARGV[2], ARGV[3]
local n = (#ARGV - 3) / 3
expect_types({ready, 'list', prio, 'zset', delayed, 'zset', stats, 'hash'})

local seq = redis.call('HINCRBY', stats, 'seq', n) - n
local nothing_ready = redis.call('LLEN', ready) == 0 and
                      redis.call('ZCARD', prio) == 0
local now, ring = nil, false
local emit = monitor(prefix)
local out, plain, added = {}, {}, 0

for i = 4, #ARGV, 3 do
  local id, payload, opts = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  seq = seq + 1
  local existed = 0
  if id == '' then
    id = int(seq)
  elseif redis.call('EXISTS', prefix .. id) == 1 then
    existed = 1
  end
  if existed == 0 then
    local delay, p, m, b = 0, 0, nil, ''
    if opts ~= '' then
      local d_, p_, m_, b_ = string.match(opts, '^(%d+),(%-?%d+),(%d+),(.*)$')
      delay, p, b = tonumber(d_), tonumber(p_), b_
      if tonumber(m_) ~= DEFAULT_MAX_ATTEMPTS then m = m_ end
    end
    local k = prefix .. id
    local f = {'d', payload}
    if m then f[#f + 1] = 'm'; f[#f + 1] = m end
    if p ~= 0 then f[#f + 1] = 'p'; f[#f + 1] = p end
    if b ~= '' then f[#f + 1] = 'b'; f[#f + 1] = b end
    if ch ~= '' then f[#f + 1] = 'n'; f[#f + 1] = ch end
    if delay > 0 then
      now = now or now_ms()
      f[#f + 1] = 's'; f[#f + 1] = 'delayed'
      redis.call('HSET', k, unpack(f))
      if push_delayed(delayed, id, now + delay) then ring = true end
    else
      f[#f + 1] = 's'; f[#f + 1] = 'ready'
      redis.call('HSET', k, unpack(f))
      if p == 0 then plain[#plain + 1] = id
      else redis.call('ZADD', prio, prio_score(p, seq), id) end
      if nothing_ready then ring = true end
    end
    added = added + 1
    emit('enqueued', id)
  end
  out[#out + 1] = id
  out[#out + 1] = existed
end

if #plain > 0 then rpush_all(ready, plain) end
if added > 0 then redis.call('HINCRBY', stats, 'enqueued', added) end
if ring then redis.call('PUBLISH', wake, '1') end
return out
