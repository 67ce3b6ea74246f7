-- deps_resume: jobs of this queue waiting for their dependencies whose
-- registration is due to be made again (rjq.h "Dependencies"): their
-- enqueuing client may have died between deps_add.lua and its
-- deps_watch.lua calls (or a registration failed), so no dependency knows
-- of them. The sweep (the periodic visit of the queue, deps.c) asks for a
-- page of those registered more than DEPS_RESUME_MS ago and registers each
-- pending dependency again (deps_watch.lua is idempotent; a dependency
-- that finished meanwhile is then counted, deps_release.lua, once). Each
-- job is put back in the set at now + how long it has waited (at most an
-- hour, at least DEPS_RESUME_MS) - DEPS_RESUME_MS: looked at again after
-- as long as it had waited, so a job waiting long is looked at seldom.
-- KEYS (src/keys.def; bound to these locals): cols, waiting, deps
-- ARGV: 1 page size (<= 100)
-- Returns { id, pending, ... }: pending the job's dependencies still
-- pending, "<queue> <id>" lines.
local J = columns(cols)
local limit = math.min(tonumber(ARGV[1]) or 0, 100)
local now = now_ms()
local out = {}
if limit < 1 then return out end
expect_types({waiting, 'zset', deps, 'hash', J.s, 'hash'})
local ids = redis.call('ZRANGEBYSCORE', waiting, '-inf', now - DEPS_RESUME_MS, 'LIMIT', 0, limit)
if #ids == 0 then return out end
local lists = redis.call('HMGET', deps, unpack(ids))
local states = redis.call('HMGET', J.s, unpack(ids))
for i, id in ipairs(ids) do
  local state, _, _, tm = state_of(states[i])
  if state ~= 'waiting' or not lists[i] then
    redis.call('ZREM', waiting, id) -- (not waiting: left behind)
  else
    local pending = {}
    for q, d in string.gmatch(lists[i], '\nw (%S+) (%S+)') do pending[#pending + 1] = q .. ' ' .. d end
    local since = tonumber((times_split(tm))) or now
    local age = math.max(DEPS_RESUME_MS, math.min(now - since, 3600000))
    redis.call('ZADD', waiting, now + age - DEPS_RESUME_MS, id)
    out[#out + 1] = id
    out[#out + 1] = table.concat(pending, '\n')
  end
end
return out
