-- deps_trim: the dead and cancelled jobs kept past the cap (the dead
-- cap, which cancelled jobs share) while their dependents were not all
-- released (lib.lua trim_oldest keeps them) go once they are: the client
-- sends it after deps_done when a job whose entry that call dropped ended
-- dead or cancelled (deps.c), so a queue with nothing more to finish
-- returns to its cap at the release, not at its next trim. A job whose
-- dependents are still not all released stays (trim_oldest).
-- KEYS (src/keys.def; bound to these locals): dead, cancelled, cols,
--       dedup, deps, dependents
-- ARGV: 1 the dead cap
-- Returns how many records went.
local cap = tonumber(ARGV[1])
if not cap or cap < 1 or #ARGV ~= 1 then return redis.error_reply('ERR rjq deps_trim: bad arguments') end
local over = {}
for _, set in ipairs({dead, cancelled}) do
  local extra = typed('zset', 'ZCARD', set) - cap
  if extra > 0 then over[#over + 1] = set; over[#over + 1] = extra end
end
if #over == 0 then return 0 end
local J = columns(cols)
J.u, J.dp, J.dt = dedup, deps, dependents
-- (every key a trim writes, before its first write: forget_jobs and
-- delete_jobs write the dedup set, the deps hash and every column)
expect_types({J.u, 'zset', J.dp, 'hash', dependents, 'hash', J.d, 'hash', J.s, 'hash', J.o, 'hash',
              J.r, 'hash', J.e, 'hash', J.f, 'hash', J.n, 'hash', J.a, 'hash', J.x, 'hash', J.i, 'zset'})
local n = 0
for i = 1, #over, 2 do -- (a set's count before its trim: cap + extra, read above)
  trim_oldest(J, over[i], over[i + 1])
  n = n + cap + over[i + 1] - redis.call('ZCARD', over[i])
end
return n
