-- deps_due: the dependents to release of jobs of this queue that have
-- finished (dependents column, deps_watch.lua): asked by the client that
-- finished them (ids given), or by the sweep (ARGV 1 a cursor: HSCAN of
-- the column, a page at a time), which finds those whose finisher died
-- before it told them. A job not finished yet is skipped.
-- KEYS (src/keys.def; bound to these locals): cols, dependents
-- ARGV: 1 '' (ids follow) or 'scan', 2 the scan cursor, then the ids
-- Returns { cursor, id, outcome, dependents, ... }: cursor '0' when the
-- scan is over (or no scan), per finished job its outcome ('completed',
-- 'dead', 'cancelled') and its dependents, "<queue> <id>" lines.
local J = columns(cols)
local ids, lists, cursor = {}, {}, '0'
if ARGV[1] == 'scan' then
  local page = redis.call('HSCAN', dependents, ARGV[2], 'COUNT', 100)
  cursor = page[1]
  for i = 1, #page[2], 2 do ids[#ids + 1] = page[2][i]; lists[#ids] = page[2][i + 1] end
else
  for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
  if #ids > 0 then lists = redis.call('HMGET', dependents, unpack(ids)) end
end
local out = {cursor}
if #ids == 0 then return out end
local s = redis.call('HMGET', J.s, unpack(ids))
for i, id in ipairs(ids) do
  local state = state_of(s[i])
  if lists[i] and (state == 'completed' or state == 'dead' or state == 'cancelled') then
    out[#out + 1] = id; out[#out + 1] = state; out[#out + 1] = lists[i]
  elseif lists[i] and not s[i] and redis.call('HEXISTS', J.d, id) == 0 then
    out[#out + 1] = id; out[#out + 1] = 'missing'; out[#out + 1] = lists[i] -- (record deleted)
  end
end
return out
