-- forget: drop the held index's members of tokens whose jobs have all
-- left their worker (see the held index in lib.lua), when no completion
-- batch carried them.
-- KEYS (src/keys.def; bound to these locals): held
-- ARGV: the tokens
expect_types({held, 'zset'})
forget(held, ARGV)
return #ARGV
