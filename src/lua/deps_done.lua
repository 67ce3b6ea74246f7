-- deps_done: every dependent of these finished jobs was released
-- (deps_release.lua): their dependents entries go. An entry that grew
-- since it was read (it cannot once its job finished: deps_watch.lua
-- answers a finished job at once) is kept.
-- KEYS (src/keys.def; bound to these locals): dependents
-- ARGV: per job: its id, the dependents entry that was released
-- Returns how many entries went.
local gone = 0
for i = 1, #ARGV, 2 do
  if redis.call('HMGET', dependents, ARGV[i])[1] == ARGV[i + 1] then
    redis.call('HDEL', dependents, ARGV[i])
    gone = gone + 1
  end
end
return gone
