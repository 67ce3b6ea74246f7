-- deps_watch: register dependent jobs (of any queues) with jobs of this
-- queue, which they wait for: those of one client's loop turn together
-- (deps.c gathers them). Race-free like watch.lua: a job that has
-- finished is answered from its state at once (the caller then counts
-- it, deps_release.lua); one still unfinished records the dependent in
-- its dependents column (nothing among its watchers: the entry is what the
-- script that finishes it reads to tell its caller there are dependents
-- to release: complete.lua, fail.lua, cancel.lua, the sweeps). Idempotent:
-- a dependent registered twice is recorded once.
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
-- (lib.lua; deps_add.lua registers with its own queue's jobs.) No TYPE
-- call: DEPS.register reads each of these keys (HMGET, HEXISTS) before its
-- first write, so a wrongly typed one fails a read with nothing written;
-- its refusal then names the key (expect_types).
local ok, out = pcall(DEPS.register, J, dependents, ARGV)
if ok then return out end
if string.find(type(out) == 'table' and tostring(out.err) or tostring(out), 'WRONGTYPE', 1, true) then
  expect_types({J.d, 'hash', J.s, 'hash', dependents, 'hash'})
end
error(out)
