-- job: one job's record, for inspection.
-- KEYS: the job columns
-- ARGV: 1 id
-- Returns { state, attempts, max_attempts, payload, result, error, token,
-- enqueued, started, ended } with nil entries when absent; all nil when
-- there is no such job. token: the fencing token of the attempt that holds
-- the job (active) or ran its last attempt (completed, dead, cancelled;
-- the state column keeps it). The times are the server's, in ms (the
-- state column, lib.lua): started only once an attempt started (since the
-- job was enqueued or replayed), ended only when it has finished.
local J = columns(KEYS, 1)
local id = ARGV[1]
local v = fields(J, id, 'o', 'd', 'r', 'e')
if not v[2] then return {false, false, false, false, false, false, false, false, false, false} end
-- the state and the times: one read
local st = redis.call('HMGET', J.s, id, id .. ' q', id .. ' s', id .. ' e')
local state, attempts, token = state_of(st[1])
if state == 'completed' and not v[3] then v[3] = '' end -- empty: not stored
local _, max = parse_options(v[1])
local started = attempts > 0 and st[3] or false
local ended = (state == 'completed' or state == 'dead' or state == 'cancelled') and st[4] or false
return {state, tostring(attempts), tostring(max), v[2], v[3], v[4], token or false, st[2] or false, started,
        ended}
