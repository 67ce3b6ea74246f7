-- forget: drop the held index's members of tokens whose jobs have all
-- left their worker (see the held index in lib.lua), when no completion
-- batch carried them.
-- KEYS: 1 held
-- ARGV: the tokens
expect_types({KEYS[1], 'zset'})
forget(KEYS[1], ARGV)
return #ARGV
