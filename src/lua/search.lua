-- search: one step of a scan of the queue's payloads for bytes (rjq.h
-- rjq_queue_search): one HSCAN of the payload column, bounded by COUNT, so
-- a step costs the same whatever the queue's size; nothing is written.
-- KEYS (src/keys.def; bound to these locals): cols
-- ARGV: 1 cursor ('0' to start), 2 count (HSCAN's COUNT hint), 3 the bytes
--       looked for (plain, not a pattern)
-- Returns { next cursor ('0': the scan is over), jobs in the queue (HLEN
-- of the payload column), payloads read, id1, state1, id2, state2, ... }
-- for each payload read that holds the bytes (state: its state word, as
-- lib.lua's state_of reads it: no state record is a ready job).
local r = redis.call('HSCAN', cols[1], ARGV[1], 'COUNT', ARGV[2])
local kv, needle, ids = r[2], ARGV[3], {}
for i = 1, #kv, 2 do
  if string.find(kv[i + 1], needle, 1, true) then ids[#ids + 1] = kv[i] end
end
local out = {r[1], redis.call('HLEN', cols[1]), #kv / 2}
if #ids > 0 then
  local st = redis.call('HMGET', cols[2], unpack(ids))
  for i = 1, #ids do
    out[#out + 1] = ids[i]
    out[#out + 1] = (state_of(st[i] or nil))
  end
end
return out
