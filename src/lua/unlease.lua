-- unlease: a scheduler that stops gives its lease up (if it still holds
-- it), so another takes over at once.
-- KEYS (src/keys.def; bound to these locals): schedlease
-- ARGV: 1 token
-- Returns 1 when it was given up, else 0.
if redis.call('GET', schedlease) == ARGV[1] then return redis.call('DEL', schedlease) end
return 0
