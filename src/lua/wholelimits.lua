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
expect_types({shardlimits, 'string', limitsepoch, 'string'})
if ARGV[1] == 'begin' then
  local e = (tonumber(redis.call('GET', limitsepoch) or '0') or 0) + 1
  redis.call('SET', limitsepoch, int(e))
  return e
end
local e = tonumber(ARGV[5])
local now = redis.call('GET', shardlimits)
if now then
  local have = tonumber(string.match(now, '^1 %d+ %d+ %d+ (%d+)$') or '0')
  if have >= e then return 0 end
end
redis.call('SET', shardlimits, '1 ' .. int(tonumber(ARGV[2])) .. ' ' .. int(tonumber(ARGV[3])) ..
  ' ' .. int(tonumber(ARGV[4])) .. ' ' .. int(e))
return 1
