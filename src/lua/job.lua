-- job: one job's record, for inspection.
-- KEYS (src/keys.def; bound to these locals): cols
-- ARGV: 1 id
-- Returns { state, attempts, max_attempts, payload, result, error, token,
-- enqueued, started, ended, attempts history (the attempts column),
-- headers (their text, src/headers.h: the options column's after '\n') } with
-- nil entries when absent; all nil when
-- there is no such job. token: the fencing token of the attempt that holds
-- the job (active) or ran its last attempt (completed, dead, cancelled;
-- the state column keeps it). The times are the server's, in ms (the
-- state column, lib.lua): started only once an attempt started (since the
-- job was enqueued or replayed), ended only when it has finished.
local J = columns(cols)
local v = fields(J, ARGV[1], 's', 'o', 'd', 'r', 'e', 'a')
if not v[3] then return {false, false, false, false, false, false, false, false, false, false, false, false} end
local state, attempts, token, tm = state_of(v[1])
if state == 'completed' and not v[4] then v[4] = '' end -- empty: not stored
local _, max, _b, _t, _u, headers = parse_options(v[2])
local q, started, ended = times_split(tm)
if attempts == 0 then started = '' end
if state ~= 'completed' and state ~= 'dead' and state ~= 'cancelled' then ended = '' end
return {state, tostring(attempts), tostring(max), v[3], v[4], v[5], token or false, q ~= '' and q or false,
        started ~= '' and started or false, ended ~= '' and ended or false, v[6] or false,
        headers or false}
