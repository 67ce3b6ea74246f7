-- deps_watch: register a dependent job (of any queue) with job `id` of
-- this queue, which it waits for. Race-free like watch.lua: a job that
-- has finished is answered from its state at once (the caller then
-- counts it, deps_release.lua); one still unfinished records the
-- dependent in its dependents column and the mark DEPS_MARK among its
-- watchers, so the script that finishes it tells its caller there are
-- dependents to release (complete.lua, fail.lua, cancel.lua, the sweeps).
-- Idempotent: a dependent registered twice is recorded once.
-- KEYS (src/keys.def; bound to these locals): cols, dependents
-- ARGV: 1 id, 2 the dependent's queue, 3 the dependent's id
-- Returns the outcome so far: 'waiting' (registered), 'completed',
-- 'dead', 'cancelled', or 'missing' (no such job).
local id, dq, did = ARGV[1], ARGV[2], ARGV[3]
local J = columns(cols)
expect_types({J.d, 'hash', J.s, 'hash', J.n, 'hash', dependents, 'hash'})
local v = fields(J, id, 'd', 's', 'n')
if not v[1] then return 'missing' end
local state = state_of(v[2])
if state == 'completed' or state == 'dead' or state == 'cancelled' then return state end
local entry = dq .. ' ' .. did
local have = redis.call('HMGET', dependents, id)[1]
if not have then
  redis.call('HSET', dependents, id, entry)
elseif not string.find('\n' .. have .. '\n', '\n' .. entry .. '\n', 1, true) then
  redis.call('HSET', dependents, id, have .. '\n' .. entry)
end
local n = v[3] or ''
if not string.find(' ' .. n .. ' ', ' ' .. DEPS_MARK .. ' ', 1, true) then
  set_watchers(J, {id, n == '' and DEPS_MARK or n .. ' ' .. DEPS_MARK})
end
return 'waiting'
