-- gstats: the groups by depth (ready jobs, most first), each with its
-- active count and settings (README "Groups"; groups_lib.lua): a page of
-- the depth index G..'depth' (the groups with ready ids, kept by the
-- writers: GROUPS.deepen, GROUPS.taken), then of G..'busy' (the groups
-- with running jobs only, by name; GROUPS.busy, GROUPS.tidy): O(K log n)
-- for K rows, and one HMGET of their running counts and started counters
-- (g:act; the busy page's in the same one), whatever the number of groups.
-- It only reads (a monitor user runs it).
-- KEYS (src/keys.def; bound to these locals): groups
-- ARGV: 1 offset, 2 count (1..1000), 3 one group's name ('' = the list)
-- Returns { groups with jobs (ready or running; one group: 1 or 0), then
-- 10 per group: name, depth, active, concurrency (-1 none), weight, paused (0/1), rate
-- (starts; 0 none), its window (ms; 0 none), max_waiting (0 none), the
-- jobs it started while listed (GROUPS.sfield; 0 for a client of an
-- older version's starts) }.
local offset, count, one = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
if not offset or not count or offset < 0 or count < 1 or count > 1000 then
  return redis.error_reply('ERR rjq gstats: bad range')
end
local rows, total = {}, 0
if one ~= '' then
  local depth = redis.call('LLEN', groups .. 'r:' .. one) + redis.call('ZCARD', groups .. 'p:' .. one)
  rows[1] = {one, depth, 0} -- (total: 1 once its running count is read, if it has work)
else
  local idx, busy = groups .. 'depth', groups .. 'busy'
  local nd, nb = redis.call('ZCARD', idx), redis.call('ZCARD', busy)
  total = nd + nb
  if offset < nd then
    local page = redis.call('ZRANGE', idx, offset, offset + count - 1, 'WITHSCORES')
    for i = 1, #page, 2 do
      local g = page[i]
      rows[#rows + 1] = {g, math.max(-tonumber(page[i + 1]), 0), 0}
    end
  end
  -- then the groups with running jobs only, by name (marked: one whose
  -- running count in g:act is 0 is not shown nor counted, below)
  local from = math.max(offset - nd, 0)
  if #rows < count and from < nb then
    local page = redis.call('ZRANGE', busy, from, from + count - #rows - 1)
    for _, g in ipairs(page) do rows[#rows + 1] = {g, 0, 0, busy = true} end
  end
end
-- their running counts and started counters, one read (g:act: every
-- group's, GROUPS.count, GROUPS.sfield), the busy page's with the index's
-- (each count read once). A group of the busy page with a running count
-- of 0 is not shown nor counted (its ids left active by a path that left
-- it in G..'busy' until its next tidy: GROUPS.active dropped its stale
-- slot members; this script only reads, the total is corrected for the
-- entries of the page read).
if #rows > 0 then
  local names, n = {}, #rows
  for i, row in ipairs(rows) do names[i] = row[1]; names[n + i] = GROUPS.sfield(row[1]) end
  local v, kept = hmget(groups .. 'act', names), {}
  for i = 1, n do
    local row, run = rows[i], tonumber(v[i]) or 0
    if row.busy and run <= 0 then
      total = total - 1
    else
      row[3], row[4] = run, tonumber(v[n + i]) or 0
      kept[#kept + 1] = row
    end
  end
  rows = kept
end
-- one group: listed with zeros when it has nothing, counted only with work
if one ~= '' and (rows[1][2] > 0 or rows[1][3] > 0) then total = 1 end
local out = {total}
local c = {}
for i = 1, #rows do
  local g = rows[i][1]
  local limit, weight, paused, rate, win, bound = GROUPS.conf(groups, g, c)
  out[#out + 1] = g
  out[#out + 1] = rows[i][2]
  out[#out + 1] = rows[i][3]
  out[#out + 1] = limit or -1
  out[#out + 1] = weight
  out[#out + 1] = paused and 1 or 0
  out[#out + 1] = rate or 0
  out[#out + 1] = rate and win or 0
  out[#out + 1] = bound or 0
  out[#out + 1] = rows[i][4]
end
return out
