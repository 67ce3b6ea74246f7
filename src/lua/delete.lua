-- delete: remove finished jobs for good (an operator's action): one dead
-- or cancelled job by id, or the oldest `n` of the dead or cancelled set
-- (purge, a page per call). Their records go (forget_jobs: an id with a
-- dedup time stays reserved until it is over). Waiting and running jobs
-- are not deleted here: cancelling them tells their awaits and workers;
-- completed jobs leave by their retention.
-- KEYS (src/keys.def; bound to these locals): dead, cancelled, cols, dedup, deps
-- ARGV: 1 'id', 'dead' or 'cancelled'; 2 the id, or n (<= 1000)
-- Returns, for an id: 1 deleted, -1 no such job, -2 it is in another
-- state; for a set: how many were deleted.
local J = columns(cols)
J.u = dedup
J.dp = deps
expect_types({dead, 'zset', cancelled, 'zset', J.u, 'zset', J.dp, 'hash', J.d, 'hash', J.s, 'hash', J.o, 'hash',
              J.r, 'hash', J.e, 'hash', J.f, 'hash', J.n, 'hash'})
if ARGV[1] == 'id' then
  local id = ARGV[2]
  for _, key in ipairs({dead, cancelled}) do
    local at = redis.call('ZSCORE', key, id)
    if at then
      forget_jobs(J, {id}, {tonumber(at)})
      redis.call('ZREM', key, id)
      return 1
    end
  end
  return redis.call('HEXISTS', J.d, id) == 1 and -2 or -1
end
local key = (ARGV[1] == 'dead' and dead) or (ARGV[1] == 'cancelled' and cancelled)
if not key then return redis.error_reply('ERR unknown set ' .. ARGV[1]) end
local n = math.min(redis.call('ZCARD', key), tonumber(ARGV[2]), 1000)
if n > 0 then trim_oldest(J, key, n) end
return n
