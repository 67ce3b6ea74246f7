-- qformat: set the queue's data format (docs/scripts.md "Queue format 2"),
-- the meta field `format` (absent = 1). Format 2 lets the lean enqueue
-- (enqueue_one.lua) keep an awaited pushed job's reply channel in its
-- state value ("active <attempt> <token> @<times> <channel>") instead of
-- the watchers column; every script of a build that knows format 2 reads
-- both forms, so an operator sets it once every client of the queue runs
-- such a build. Going back to 1 is refused while the queue has active jobs
-- (only an active job's state may hold a channel: every other transition
-- moves it to the watchers column), so no format-2 data is left behind; a
-- lean enqueue reads the field before it writes one (a client that learnt
-- 2 earlier then writes format 1).
-- Going back to 1 also strips the " 2" mark of every registration in
-- idle (lib.lua registration(): a marked one tells the lean enqueue the
-- queue is format 2 without reading meta).
-- KEYS (src/keys.def; bound to these locals): meta, active, idle
-- ARGV: 1 the format, '1' or '2'
-- Returns 1 when the format changed, 0 when it already was so, -2 when
-- going back to 1 was refused (jobs are active).
local want = ARGV[1]
if want ~= '1' and want ~= '2' then return redis.error_reply('ERR rjq: format must be 1 or 2') end
expect_types({meta, 'hash', active, 'zset', idle, 'hash'})
local cur = redis.call('HGET', meta, 'format') or '1'
if cur == want then return 0 end
if want == '2' then
  redis.call('HSET', meta, 'format', '2')
  return 1
end
local n = redis.call('ZCARD', active)
if redis.call('ZSCORE', active, ACTIVE_PIN) then n = n - 1 end
if n > 0 then return -2 end
redis.call('HDEL', meta, 'format')
local all = redis.call('HGETALL', idle)
for i = 1, #all, 2 do
  local b = string.match(all[i + 1], '^(%d+ %S+ %d+ %S+) 2$')
  if b then redis.call('HSET', idle, all[i], b) end
end
return 1
