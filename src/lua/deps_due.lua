-- deps_due: the dependents to release of jobs of this queue that have
-- finished (dependents column, deps_watch.lua): asked by the client that
-- finished them (ids given), or by the sweep (ARGV 1 'scan', 2 a cursor:
-- the offset of a page of 100 in depsfin, then, from DEPSFINC_AT on, in
-- depsfinc: the jobs that finished with dependents not all released yet),
-- which finds those whose finisher died before it told them: it reads only
-- those, none once every finished job's dependents were released
-- (deps_done.lua). A job not finished yet is skipped; an index member none
-- of whose ids has a dependents entry is dropped. A depsfinc member is a
-- completion call's ids joined by spaces (lib.lua DEPSFIN_MEMBER); the
-- sweep of versions before it read depsfin only (one id a member).
-- KEYS (src/keys.def; bound to these locals): cols, dependents, depsfin,
--       depsfinc
local J = columns(cols)
local ids, lists, cursor = {}, {}, '0'
if ARGV[1] == 'scan' then
  -- (by rank: an entry that leaves meanwhile shifts the rest, which the
  -- next period reads)
  -- (a member is a completion call's ids joined by spaces, or one id:
  -- lib.lua DEPSFIN_MEMBER; one whose ids have no entry left goes)
  local DEPSFINC_AT = 1000000000000000 -- (10^15: a cursor from here pages depsfinc)
  local from = math.max(math.floor(tonumber(ARGV[2]) or 0), 0)
  local key, base = depsfin, 0
  if from >= DEPSFINC_AT then key, base, from = depsfinc, DEPSFINC_AT, from - DEPSFINC_AT end
  local members = typed('zset', 'ZRANGE', key, from, from + 99)
  local stale, last = {}, {} -- (last[m]: the index in ids after member m's ids)
  for m, member in ipairs(members) do
    for id in string.gmatch(member, '%S+') do ids[#ids + 1] = id end
    last[m] = #ids
  end
  if #ids > 0 then
    lists = hmget(dependents, ids, 'hash')
    local i = 1
    for m, member in ipairs(members) do
      local any = false
      while i <= last[m] do any = any or not not lists[i]; i = i + 1 end
      if not any then stale[#stale + 1] = member end
    end
    if #stale > 0 then call_all('ZREM', key, stale) end
  elseif #members > 0 then
    stale = members -- (empty members: not rjq's)
    call_all('ZREM', key, stale)
  end
  if #members == 100 and from + 100 - #stale > 0 then
    cursor = string.format('%.0f', base + from + 100 - #stale)
  elseif key == depsfin and redis.call('EXISTS', depsfinc) == 1 then
    cursor = string.format('%.0f', DEPSFINC_AT) -- (depsfin read: depsfinc next)
  end
else
  for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
  if #ids > 0 then lists = redis.call('HMGET', dependents, unpack(ids)) end
end
local out = {cursor}
if #ids == 0 then return out end
local s = hmget(J.s, ids)
for i, id in ipairs(ids) do
  local state = state_of(s[i])
  if lists[i] and (state == 'completed' or state == 'dead' or state == 'cancelled') then
    out[#out + 1] = id; out[#out + 1] = state; out[#out + 1] = lists[i]
  elseif lists[i] and not s[i] and redis.call('HEXISTS', J.d, id) == 0 then
    out[#out + 1] = id; out[#out + 1] = 'missing'; out[#out + 1] = lists[i] -- (record deleted)
  end
end
return out
