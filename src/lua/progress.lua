-- progress: a running job reports progress bytes to whoever awaits it.
-- KEYS: 1 the job's name (<prefix>:{Q}:job:<id>)
-- ARGV: 1 token of the claim, 2 progress bytes
-- Returns 1 when published (or nobody listens), 0 when the lease is lost.
local name = KEYS[1]
local prefix, id = split_name(name)
if not prefix then return 0 end
local v = fields(columns(prefix), id, 's', 'n')
local state, _, t = state_of(v[1])
if state ~= 'active' or t ~= ARGV[1] then return 0 end
notify(v[2], name, 'progress', ARGV[2])
return 1
