-- deps_watch: register dependent jobs (of any queues) with jobs of this
-- queue, which they wait for: those of one client's loop turn together
-- (deps.c gathers them). Race-free like watch.lua: a job that has
-- finished is answered from its state at once (the caller then counts
-- it, deps_release.lua); one still unfinished records the dependent in
-- its dependents column and the mark DEPS_MARK among its watchers, so the
-- script that finishes it tells its caller there are dependents to
-- release (complete.lua, fail.lua, cancel.lua, the sweeps). Idempotent: a
-- dependent registered twice is recorded once.
-- KEYS (src/keys.def; bound to these locals): cols, dependents
-- ARGV: per registration: the id of the job of this queue, the
--       dependent's queue, the dependent's id
-- Returns per registration the outcome so far: 'waiting' (registered),
-- 'completed', 'dead', 'cancelled', or 'missing' (no such job). A missing
-- job's dependents entry, left when its record was removed before it
-- finished, goes: nothing will finish it, and each of its dependents
-- learns it is missing from its own registration (the resume sweep's).
local J = columns(cols)
if #ARGV < 3 or #ARGV % 3 ~= 0 then return redis.error_reply('ERR rjq deps_watch: bad arguments') end
expect_types({J.d, 'hash', J.s, 'hash', J.n, 'hash', dependents, 'hash'})
local ids = {}
for i = 1, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
local s, n = hmget(J.s, ids), hmget(J.n, ids)
local have = hmget(dependents, ids)
-- order: the jobs given dependents (first seen); had/list: their entry as read, as written
local out, order, had, list, marks, stale = {}, {}, {}, {}, {}, {}
for k, id in ipairs(ids) do
  local state = state_of(s[k])
  if not s[k] and redis.call('HEXISTS', J.d, id) == 0 then
    out[k] = 'missing'
    if have[k] then stale[#stale + 1] = id end
  elseif state == 'completed' or state == 'dead' or state == 'cancelled' then
    out[k] = state
  else
    out[k] = 'waiting'
    local entry = ARGV[3 * k - 1] .. ' ' .. ARGV[3 * k]
    if had[id] == nil then
      order[#order + 1] = id
      had[id] = have[k] or false
      list[id] = have[k] or false
      local w = n[k] or ''
      if not string.find(' ' .. w .. ' ', ' ' .. DEPS_MARK .. ' ', 1, true) then
        marks[#marks + 1] = id; marks[#marks + 1] = w == '' and DEPS_MARK or w .. ' ' .. DEPS_MARK
      end
    end
    local l = list[id]
    if not l then
      list[id] = entry
    elseif not string.find('\n' .. l .. '\n', '\n' .. entry .. '\n', 1, true) then
      list[id] = l .. '\n' .. entry
    end
  end
end
local fv = {}
for _, id in ipairs(order) do
  if list[id] ~= had[id] then fv[#fv + 1] = id; fv[#fv + 1] = list[id] end
end
if #fv > 0 then call_all('HSET', dependents, fv, 2) end
if #stale > 0 then call_all('HDEL', dependents, stale) end
if #marks > 0 then set_watchers(J, marks) end
return out
