-- processes: the process registry. A client with workers renews its entry
-- in the liveness set every beat and says what it is in the info hash
-- (beat.lua): host, pid, start, name, and per queue its workers'
-- concurrency and running jobs. Listed are the clients whose entry has not
-- run out and that nobody sweeps (a swept client's entry was pushed
-- forward by the sweep's lease, but it is gone).
-- KEYS (src/keys.def; bound to these locals): live, info, sweeps
-- ARGV: 1 offset, 2 limit (in the order of the entries' ends, which every
--       beat moves: a consistent list is one page)
-- Returns { server time ms, then per client: id, its entry's end (ms), its
-- info ('' when it said nothing yet) }.
expect_types({live, 'zset', info, 'hash', sweeps, 'hash'})
local now = now_ms()
local out = {now}
-- offset and limit count the clients listed, so a page shorter than limit
-- is the end: clients being swept are skipped as the scan goes
local skip, want, from = tonumber(ARGV[1]), tonumber(ARGV[2]), 0
local chunk = want + 16
while want > 0 do
  local page = redis.call('ZRANGEBYSCORE', live, '(' .. int(now), '+inf', 'WITHSCORES', 'LIMIT',
                          from, chunk)
  for i = 1, #page, 2 do
    local who = page[i]
    if want > 0 and not redis.call('HMGET', sweeps, who)[1] then
      if skip > 0 then
        skip = skip - 1
      else
        out[#out + 1] = who
        out[#out + 1] = tonumber(page[i + 1])
        out[#out + 1] = redis.call('HMGET', info, who)[1] or ''
        want = want - 1
      end
    end
  end
  if #page < 2 * chunk then break end
  from = from + chunk
end
return out
