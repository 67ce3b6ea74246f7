-- deps_done: every dependent of these finished jobs was released
-- (deps_release.lua): their dependents entries go, and their ids leave
-- the sweep's index, depsfin or depsfinc (the sweep reads them no more). An entry that grew since it was
-- read (it cannot once its job finished: deps_watch.lua answers a
-- finished job at once) is kept.
-- The index's members (lib.lua DEPSFIN_MEMBER): a completion call that
-- left several such jobs wrote ONE member in depsfinc, its ids sorted and
-- joined by spaces; every other member is one id, in depsfin. These ids'
-- depsfinc member is removed when they are exactly one member's (a
-- completion's own deps_done: one ZREM a call); else each id leaves
-- depsfin; a depsfinc member holding only some of them (part of a call's
-- releases failed, or the sweep's pages) stays until the sweep finds none
-- of its ids with an entry (deps_due.lua).
-- KEYS (src/keys.def; bound to these locals): dependents, depsfin, depsfinc
-- ARGV: per job: its id, the dependents entry that was released
-- Returns how many entries went.
local ids = {}
for i = 1, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then return 0 end
local have, drop = hmget(dependents, ids, 'hash'), {}
for k, id in ipairs(ids) do
  if have[k] and have[k] == ARGV[2 * k] then drop[#drop + 1] = id end
end
if #drop > 0 then DEPS.forget(dependents, drop) end -- (the hash goes with its last entry)
local unindex = {} -- (those dropped, and those whose entry had gone already)
for k, id in ipairs(ids) do if not have[k] or have[k] == ARGV[2 * k] then unindex[#unindex + 1] = id end end
local whole = 0
if #unindex == #ids and #ids > 1 then
  local sorted = {}
  for k = 1, #ids do sorted[k] = ids[k] end
  table.sort(sorted)
  whole = typed('zset', 'ZREM', depsfinc, table.concat(sorted, ' '))
end
if whole == 0 then call_all('ZREM', depsfin, unindex, 1, 'zset') end
return #drop
