-- wholelimits: a sharded queue's change of its whole-queue limits, in two
-- calls around the shards' own writes (shard.c, docs/sharding.md 6b):
--   'begin': the change's epoch, one more than the newest begun
--     (limitsepoch); the caller then writes every shard's share with it
--     (limits.lua: a shard refuses an epoch older than its own, so a
--     re-split step that read older figures writes nothing there);
--   'set' C R W E: once every shard took its share, the figures
--     "1 C R W E" stored for the re-splitters (shardlimits), unless a
--     change with a newer epoch stored its own first (its shares won).
-- KEYS (src/keys.def; bound to these locals): shardlimits, limitsepoch
-- ARGV: 1 'begin' | 'set', then for 'set': 2 concurrency, 3 rate,
--       4 window ms, 5 epoch
-- Returns the epoch ('begin'); 1 when stored, 0 when a newer one was ('set').
-- Every number is checked before the first write: an argument that is not
-- a non-negative integer below 2^53 refuses the call ('ERR rjq
-- wholelimits: <what> is not an integer in [0, 2^53)'), and so does a
-- limitsepoch that is not one (written behind rjq's back: WRONGTYPE,
-- naming it; 'begin' used to restart its count at 1), nothing written.
local EXACT_MAX = 9007199254740992 -- 2^53
local function count(v, what)
  local n = string.match(v or '', '^%d+$') and tonumber(v)
  if not n or n >= EXACT_MAX then
    error({err = 'ERR rjq wholelimits: ' .. what .. ' is not an integer in [0, 2^53)'})
  end
  return n
end
local step = ARGV[1]
if step ~= 'begin' and step ~= 'set' then
  error({err = "ERR rjq wholelimits: step is neither 'begin' nor 'set'"})
end
local conc, rate, win, e
if step == 'set' then
  conc, rate, win = count(ARGV[2], 'concurrency'), count(ARGV[3], 'rate'), count(ARGV[4], 'rate window')
  e = count(ARGV[5], 'epoch')
end
expect_types({shardlimits, 'string', limitsepoch, 'string'})
if step == 'begin' then
  local have = redis.call('GET', limitsepoch)
  local n = string.match(have or '0', '^%d+$') and tonumber(have or '0')
  if not n or n + 1 >= EXACT_MAX then
    error({err = 'WRONGTYPE ' .. limitsepoch .. ' is not an integer in [0, 2^53 - 1), rjq expects one'})
  end
  redis.call('SET', limitsepoch, int(n + 1))
  return n + 1
end
local now = redis.call('GET', shardlimits)
if now then
  local have = tonumber(string.match(now, '^1 %d+ %d+ %d+ (%d+)$') or '0')
  if have >= e then return 0 end
end
redis.call('SET', shardlimits, '1 ' .. int(conc) .. ' ' .. int(rate) .. ' ' .. int(win) .. ' ' .. int(e))
return 1
