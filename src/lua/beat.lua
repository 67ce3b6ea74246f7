-- beat: a client with workers says it is alive, and takes on the sweep of
-- clients that stopped saying so. The liveness set holds each such client's
-- id with the server time its entry runs out; the queues hash the names of
-- the queues it has had workers on (where it may hold jobs).
-- A client whose entry ran out is swept by the first client to see it:
-- its entry is pushed forward by the sweep's own lease (so another client
-- takes over if this one dies while sweeping), the caller returns its
-- jobs queue by queue (orphans.lua) and then removes it (gone.lua).
-- A sweep is fenced against the swept client coming back (it was only
-- paused, or cut off): the sweeps hash holds each client being swept with
-- the sweep's lease end, past which orphans.lua refuses to run; a client
-- that finds itself there is told to start no job until then (a job it
-- claimed meanwhile could be returned by the sweep too).
-- The info hash holds what each client says of itself for the process
-- registry (processes.lua): upkeep.c's text, sent when it changed.
-- KEYS (src/keys.def; bound to these locals): live, queues, sweeps, info
-- ARGV: 1 client id, 2 its entry's lifetime ms, 3 its queue names
--       (space-separated; '' when unchanged since the last beat that
--       reported it known), 4 the sweep's lease ms, 5 most clients to sweep,
--       6 the server time of the caller's previous answered beat (0: none),
--       7 the longest gap between two beats that is no stall, 8 its info
--       ('' when unchanged since the last beat that reported it known)
-- A beat that comes more than that after the previous one sweeps nobody:
-- the server (or the caller) stalled, and the clients whose entries ran
-- out meanwhile had no chance to renew them (their beats may be queued
-- right behind this one).
-- Returns { server time ms, 1 when the queue names are stored plus 2 when
-- the info is, the
-- end of a sweep of the caller under way (0: none), then per client to
-- sweep: id, the sweep's lease end (for orphans.lua and gone.lua), queue
-- names }.
local me, ttl, names, lease, most = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local prev, gap = tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_ms()
if prev <= 0 or now - prev > gap then most = 0 end
-- Every key is read, or written first, by a command that is its own type
-- check (typed): a wrongly typed key fails the beat before its first
-- write, with no TYPE call (a beat runs once a second per client and
-- master: 7 commands, not 11; bench/README.md "Sharded queues").
local held_off = int_fields(sweeps, me)[1] or 0
local has_names = typed('hash', 'HEXISTS', queues, me)
local has_info = typed('hash', 'HEXISTS', info, me)
typed('zset', 'ZADD', live, int(now + ttl), me) -- (the first write)
if names ~= '' then redis.call('HSET', queues, me, names); has_names = 1 end
if ARGV[8] ~= '' then redis.call('HSET', info, me, ARGV[8]); has_info = 1 end
if held_off > 0 and held_off < now then redis.call('HDEL', sweeps, me); held_off = 0 end
local out = {now, has_names + 2 * has_info, held_off}
local until_ = now + lease
for _, who in ipairs(redis.call('ZRANGEBYSCORE', live, '-inf', now, 'LIMIT', 0, most)) do
  local q = redis.call('HMGET', queues, who)[1]
  if q then
    redis.call('ZADD', live, int(until_), who)
    redis.call('HSET', sweeps, who, int(until_))
    out[#out + 1] = who; out[#out + 1] = until_; out[#out + 1] = q
  else -- it held nothing anywhere
    redis.call('ZREM', live, who)
    redis.call('HDEL', info, who)
  end
end
return out
