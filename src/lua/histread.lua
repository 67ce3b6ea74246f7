-- histread: read the last `count` minutes (or hours) of the queue's
-- history (history.lua), the current one last.
-- KEYS (src/keys.def; bound to these locals): histm histh
-- ARGV: 1 'm' (minutes, count 1..1440), 'h' (hours, count 1..720) or 't'
--       (the totals of every flush, histh's "total"; count 1), 2 count
-- Returns { server time now (ms), the first minute (or hour) number, then
-- count values: each slot's value (history.lua), false when it is empty
-- }; a value whose minute is not the one asked for (the ring's last lap)
-- is the caller's to drop.
local step, slots, key = 60000, 1440, histm
if ARGV[1] == 'h' then step, slots, key = 3600000, 720, histh end
if ARGV[1] == 't' then -- the totals: { now, 0, the value }
  return {int(now_ms()), '0', typed('hash', 'HMGET', histh, 'total')[1]}
end
local count = tonumber(ARGV[2])
if not count or count < 1 or count > slots then error({err = 'ERR histread: bad count'}) end
local now = now_ms()
local last = math.floor(now / step)
local first = last - count + 1
local fields = {}
for i = 0, count - 1 do fields[i + 1] = int((first + i) % slots) end
local vals = typed('hash', 'HMGET', key, unpack(fields))
local out = {int(now), int(first)}
for i = 1, count do out[i + 2] = vals[i] end
return out
