-- release: hand back pushed jobs a worker did not start (it had no room,
-- was stopping, or is gone). Each goes back to the head of its priority
-- class with the attempt the push counted undone. Checked against the
-- fencing token. A stale registration of the worker is dropped too.
-- A job of a group goes back to the head of its group (its slot freed,
-- the group offered again: GROUPS.release, GROUPS.after), not to the
-- queue's ready list, so its group's limits and order hold; its start
-- leaves its group's rate log (GROUPS.unlog).
-- KEYS (src/keys.def; bound to these locals): active, ready, prio, stats,
--       idle, cols, monitored, events, groups
-- ARGV: 1 job name prefix, 2 wake channel, 3 the worker's idle field ('' for
--       none), then per job: id, token.
-- Returns the number of jobs released.
local prefix, wake, field = ARGV[1], ARGV[2], ARGV[3]
local J = columns(cols, prefix)
expect_types({active, 'zset', ready, 'list', prio, 'zset', stats, 'hash', idle, 'hash', J.s, 'hash'})

local emit = monitor(monitored, events)
-- the jobs still held by this token, in reverse, so that jobs pushed
-- together keep their order at the head
local back, hinted, seen = {}, {}, {}
local bids, bsv = {}, {} -- (their states, for channels_out)
for i = #ARGV - 1, 4, -2 do
  local id, tok = ARGV[i], ARGV[i + 1]
  local v = fields(J, id, 's', 'o')
  local state, attempts, t, tm = state_of(v[1])
  if state == 'active' and t == tok and not seen[id] then
    seen[id] = true
    back[#back + 1] = {id, attempts, v[2], tm}
    bids[#bids + 1], bsv[#bsv + 1] = id, v[1]
    if GROUPS.hinted(v[2]) then hinted[#hinted + 1] = id end
  end
end
-- (format 2: a reply channel in a state goes to the watchers column
-- before hand_back writes the state; its read of the column is that
-- column's type check, before the call's first write)
channels_out(J, bids, bsv)
if field ~= '' then redis.call('HDEL', idle, field) end
-- jobs of groups: their slots are freed, and they go back to the head of
-- their groups, as reclaim.lua returns them (README "Groups")
local gc = {}
local gof = GROUPS.release(groups, J, hinted, gc)
local gdone = {}
for _, b in ipairs(back) do
  local id, g = b[1], gof[b[1]]
  if g then
    hand_back(J, active, groups .. 'r:' .. g, groups .. 'p:' .. g, stats, wake, id, b[2], b[3], emit, b[4])
    gdone[#gdone + 1] = {g, id, 'ready'}
  else
    hand_back(J, active, ready, prio, stats, wake, id, b[2], b[3], emit, b[4])
  end
end
GROUPS.unlog(groups, gdone, gc)
if #gdone > 0 then GROUPS.after(groups, J, gdone, gc, stats) end
return #back
