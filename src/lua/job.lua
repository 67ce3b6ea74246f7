-- job: one job's record, for inspection.
-- KEYS: the job columns
-- ARGV: 1 id
-- Returns { state, attempts, max_attempts, payload, result, error, token }
-- with nil entries when absent; all nil when there is no such job. token:
-- the fencing token of the attempt that holds or completed the job (the
-- state column keeps it while active and once completed).
local J = columns(KEYS, 1)
local v = fields(J, ARGV[1], 's', 'o', 'd', 'r', 'e')
if not v[3] then return {false, false, false, false, false, false, false} end
local state, attempts, token = state_of(v[1])
if state == 'completed' and not v[4] then v[4] = '' end -- empty: not stored
local _, max = parse_options(v[2])
return {state, tostring(attempts), tostring(max), v[3], v[4], v[5], token or false}
