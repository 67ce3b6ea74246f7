-- watch: an awaiting client asks to hear about these jobs. Each job that
-- already finished is answered from its stored state; each one still
-- running gets the client's reply channel added to its watchers, so the
-- script that finishes it publishes to the client. Run only once the
-- client's subscription is confirmed: no outcome can fall in between.
-- KEYS: the job columns of the jobs' queue
-- ARGV: 1 reply channel, then the job ids
-- Returns { code, body, ... } per id: 0 no such job, 1 completed (body =
-- result), 2 dead (body = last error), 3 pending (now watched), 4
-- cancelled.
local ch = ARGV[1]
local J = columns(KEYS, 1)
local out = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local v = fields(J, id, 's', 'r', 'e', 'n')
  local state = state_of(v[1])
  if not v[1] and redis.call('HEXISTS', J.d, id) == 0 then
    out[#out + 1] = 0; out[#out + 1] = ''
  elseif state == 'completed' then
    out[#out + 1] = 1; out[#out + 1] = v[2] or ''
  elseif state == 'dead' then
    out[#out + 1] = 2; out[#out + 1] = v[3] or ''
  elseif state == 'cancelled' then
    out[#out + 1] = 4; out[#out + 1] = ''
  else
    local n = v[4] or ''
    if not string.find(' ' .. n .. ' ', ' ' .. ch .. ' ', 1, true) then
      if n == '' then n = ch else n = n .. ' ' .. ch end
      set_watchers(J, {id, n})
    end
    out[#out + 1] = 3; out[#out + 1] = ''
  end
end
return out
