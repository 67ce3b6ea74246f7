-- progress: a running job reports progress bytes to whoever awaits it.
-- KEYS (src/keys.def; bound to these locals): cols
-- ARGV: 1 job name prefix, 2 id, 3 token of the claim, 4 progress bytes
-- Returns 1 when published (or nobody listens), 0 when the lease is lost.
local prefix, id = ARGV[1], ARGV[2]
local v = fields(columns(cols, prefix), id, 's', 'n')
local state, _, t = state_of(v[1])
if state ~= 'active' or t ~= ARGV[3] then return 0 end
notify(v[2], prefix .. id, 'progress', ARGV[4])
return 1
