-- forget: drop the held index's members of tokens whose jobs have all
-- left their worker (see the held index in lib.lua), when no completion
-- batch carried them.
-- KEYS: held (src/keys.def:
--       named locals bound before this line)
-- ARGV: the tokens
expect_types({held, 'zset'})
forget(held, ARGV)
return #ARGV
