-- job: one job's record, for inspection.
-- KEYS: 1 the job's name (<prefix>:{Q}:job:<id>)
-- Returns { state, attempts, max_attempts, payload, result, error } with
-- nil entries when absent; state is nil when there is no such job.
local prefix, id = split_name(KEYS[1])
local none = {false, false, false, false, false, false}
if not prefix then return none end
local J = columns(prefix)
local v = fields(J, id, 's', 'a', 'o', 'd', 'r', 'e')
if not v[4] then return none end
local _, max = parse_options(v[3])
return {v[1] or 'ready', v[2] or '0', tostring(max), v[4], v[5], v[6]}
