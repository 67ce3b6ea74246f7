-- watch: an awaiting client asks to hear about these jobs. Each job that
-- already finished is answered from its stored state; each one still
-- running gets the client's reply channel added to its watchers, so the
-- script that finishes it publishes to the client. Run only once the
-- client's subscription is confirmed: no outcome can fall in between.
-- KEYS (src/keys.def; bound to these locals): cols
-- ARGV: 1 reply channel, then the job ids
-- Returns { code, body, headers, ... } per id: 0 no such job, 1 completed
-- (body = result), 2 dead (body = last error), 3 pending (now watched), 4
-- cancelled; headers: the job's headers text (src/headers.h), '' when none
-- (the outcome hands them to the awaiting producer: read here with the
-- state, since the published outcome does not carry them).
-- A call watches many ids (the awaits of a loop pass share one): the state,
-- watchers and options columns are read with one HMGET each for all of them (the
-- options one skipped after an EXISTS when no job has options), a
-- result or error only for a job that finished, and the new watchers go
-- out in one HSET, so a batch costs a few commands (plus one HEXISTS per
-- job enqueued by a library older than the job times: such a ready job has
-- no state field, its payload says it exists).
local ch = ARGV[1]
local J = columns(cols)
local ids = {}
for i = 2, #ARGV do ids[i - 1] = ARGV[i] end
local S = hmget(J.s, ids)
-- (format 2: a reply channel in a running job's state goes to the
-- watchers column first, so the new watcher joins it there; its read of
-- the column checks the column's type before it writes)
channels_out(J, ids, S)
local N = hmget_sparse(J.n, ids)
local O = hmget_sparse(J.o, ids)
local out, fv, now = {}, {}, {}
for i = 1, #ids do
  local id = ids[i]
  local v = S[i]
  local state = state_of(v)
  if not v and redis.call('HEXISTS', J.d, id) == 0 then
    out[#out + 1] = 0; out[#out + 1] = ''
  elseif state == 'completed' then
    out[#out + 1] = 1; out[#out + 1] = fields(J, id, 'r')[1] or ''
  elseif state == 'dead' then
    out[#out + 1] = 2; out[#out + 1] = fields(J, id, 'e')[1] or ''
  elseif state == 'cancelled' then
    out[#out + 1] = 4; out[#out + 1] = ''
  else
    local n = now[id] or N[i] or '' -- now: an id named twice in this call
    if not string.find(' ' .. n .. ' ', ' ' .. ch .. ' ', 1, true) then
      if n == '' then n = ch else n = n .. ' ' .. ch end
      now[id] = n
      fv[#fv + 1] = id; fv[#fv + 1] = n
    end
    out[#out + 1] = 3; out[#out + 1] = ''
  end
  out[#out + 1] = select(6, parse_options(O[i] or nil)) or ''
end
if #fv > 0 then set_watchers(J, fv) end
return out
