-- deps_read: what a handler reads of its job's dependencies
-- (rjq_job_dependencies, src/deps_read.c): the dependency list of a job of
-- this queue (deps_add.lua, its marks updated by deps_release.lua), and
-- how jobs of this queue stand (the dependencies that live here). The
-- client asks the job's own queue for its list, then every dependency's
-- queue for its jobs, a call per queue, all sent at once (a round trip
-- per master). Also the dependents of a job of this queue that are not
-- released yet (rjq_queue_get_dependents). Reads only.
-- KEYS (src/keys.def; bound to these locals): cols, deps, dependents
-- ARGV: 1 the id of the job whose list to read ('' = none), 2 the id of
--       the job whose dependents to read ('' = none), then the ids of jobs
--       of this queue to read
-- The list as its marks read: a job out of the waiting state whose list
-- has a head with its priority and without " h" was released when its
-- last dependency completed, which writes no marks (DEPS.release in
-- lib.lua): its 'w' lines are given as 'c'.
-- Returns { list or false, dependents or false, then per id: state ('missing' when there is no
-- such job), result (completed: '' when it returned nothing; else false),
-- error (the last failure's text, or false) }.
local J = columns(cols)
local out = {false, false}
if ARGV[1] ~= '' then
  local list = redis.call('HMGET', deps, ARGV[1])[1]
  if list and string.find(list, '\nw ', 1, true) and string.find(list, '^%a+ %d+ %-?%d+\n') then
    local s = redis.call('HMGET', J.s, ARGV[1])[1]
    if s and state_of(s) ~= 'waiting' then list = string.gsub(list, '\nw ', '\nc ') end
  end
  out[1] = list
end
if ARGV[2] ~= '' then out[2] = redis.call('HMGET', dependents, ARGV[2])[1] end
local n = #ARGV - 2
if n < 1 then return out end
local ids = {unpack(ARGV, 3)}
local d = redis.call('HMGET', J.d, unpack(ids))
local s = redis.call('HMGET', J.s, unpack(ids))
local r = redis.call('HMGET', J.r, unpack(ids))
local e = redis.call('HMGET', J.e, unpack(ids))
for i = 1, n do
  if not d[i] then
    out[#out + 1] = 'missing'; out[#out + 1] = false; out[#out + 1] = false
  else
    local state = state_of(s[i])
    local result = false
    if state == 'completed' then result = r[i] or '' end
    out[#out + 1] = state; out[#out + 1] = result; out[#out + 1] = e[i] or false
  end
end
return out
