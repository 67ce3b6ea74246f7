-- job: one job's record, for inspection.
-- KEYS: 1 the job's name (<prefix>:{Q}:job:<id>)
-- Returns { state, attempts, max_attempts, payload, result, error } with
-- nil entries when absent; state is nil when there is no such job.
local prefix, id = split_name(KEYS[1])
local none = {false, false, false, false, false, false}
if not prefix then return none end
local J = columns(prefix)
local v = fields(J, id, 's', 'o', 'd', 'r', 'e')
if not v[3] then return none end
local state, attempts = state_of(v[1])
local _, max = parse_options(v[2])
return {state, tostring(attempts), tostring(max), v[3], v[4], v[5]}
