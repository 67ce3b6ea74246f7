-- processes: the process registry. A client with workers renews its entry
-- in the liveness set every beat and says what it is in the info hash
-- (beat.lua): host, pid, start, name, and per queue its workers'
-- concurrency and running jobs. Listed are the clients whose entry has not
-- run out and that nobody sweeps (a swept client's entry was pushed
-- forward by the sweep's lease, but it is gone).
-- KEYS: 1 liveness set, 2 info, 3 sweeps (beat.lua)
-- ARGV: 1 offset, 2 limit (in the order of the entries' ends)
-- Returns { server time ms, then per client: id, its entry's end (ms), its
-- info ('' when it said nothing yet) }.
local live, info, sweeps = KEYS[1], KEYS[2], KEYS[3]
expect_types({live, 'zset', info, 'hash', sweeps, 'hash'})
local now = now_ms()
local out = {now}
local page = redis.call('ZRANGEBYSCORE', live, '(' .. int(now), '+inf', 'WITHSCORES', 'LIMIT',
                        tonumber(ARGV[1]), tonumber(ARGV[2]))
for i = 1, #page, 2 do
  local who = page[i]
  if not redis.call('HMGET', sweeps, who)[1] then
    out[#out + 1] = who
    out[#out + 1] = tonumber(page[i + 1])
    out[#out + 1] = redis.call('HMGET', info, who)[1] or ''
  end
end
return out
