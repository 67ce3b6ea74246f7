-- progress: a running job reports progress bytes to whoever awaits it.
-- KEYS: 1 job key
-- ARGV: 1 token of the claim, 2 progress bytes
-- Returns 1 when published (or nobody listens), 0 when the lease is lost.
local k = KEYS[1]
local v = redis.call('HMGET', k, 's', 't', 'n')
if v[1] ~= 'active' or v[2] ~= ARGV[1] then return 0 end
notify(v[3], k, 'progress', ARGV[2])
return 1
