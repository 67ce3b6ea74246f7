-- unlease: a scheduler that stops gives its lease up (if it still holds
-- it), so another takes over at once.
-- KEYS: 1 lease
-- ARGV: 1 token
-- Returns 1 when it was given up, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
