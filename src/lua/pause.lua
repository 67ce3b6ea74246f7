-- pause: pause or resume a queue. The queue's meta hash holds `paused`
-- (the server time it was paused) while it is paused; claims then start
-- nothing (claim.lua), completions register no idle slots (complete.lua:
-- the idle hash holds CONTROL_MARK, lib.lua)
-- and the client's visits see no work waiting (reclaim.lua), so idle
-- workers wait on the doorbell at no cost. Pausing drops every idle
-- registration, so no enqueue pushes a job either; enqueues are still
-- accepted. Resuming rings the doorbell: idle workers claim at once.
-- KEYS (src/keys.def; bound to these locals): meta, idle, monitored, events
-- ARGV: 1 job name prefix, 2 wake channel, 3 1 pause / 0 resume
-- Returns 1 when the queue's state changed, 0 when it already was so.
local prefix, wake, pause = ARGV[1], ARGV[2], ARGV[3] == '1'
expect_types({meta, 'hash', idle, 'hash'})
local emit = monitor(monitored, events)
if pause then
  if redis.call('HSETNX', meta, 'paused', int(now_ms())) == 0 then return 0 end
  reset_idle(idle, meta)
  emit('paused', '')
  return 1
end
if redis.call('HDEL', meta, 'paused') == 0 then return 0 end
reset_idle(idle, meta)
redis.call(PUB or pub_mode(), wake, '1')
emit('resumed', '')
return 1
