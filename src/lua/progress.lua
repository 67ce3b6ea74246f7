-- progress: a running job reports progress bytes to whoever awaits it.
-- KEYS (src/keys.def; bound to these locals): cols
-- ARGV: 1 job name prefix, 2 id, 3 token of the claim, 4 progress bytes
-- Returns 1 when published (or nobody listens), 0 when the lease is lost.
local prefix, id = ARGV[1], ARGV[2]
local v = fields(columns(cols, prefix), id, 's', 'n')
local state, _, t, _tm, ch = state_of(v[1])
if state ~= 'active' or t ~= ARGV[3] then return 0 end
-- (format 2: a reply channel at the state's end is a watcher too)
if ch then v[2] = v[2] and (v[2] .. ' ' .. ch) or ch end
notify(v[2], prefix .. id, 'progress', ARGV[4])
return 1
