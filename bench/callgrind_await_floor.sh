#!/bin/bash
# bench/callgrind_await_floor.sh: the least Redis can spend on an awaited job
# with rjq's promises (bench/README.md "The awaited job's floor").
#
# bench/callgrind.sh rjq-18/rjq2-18 measures rjq's lean pair (enqueue_one.lua,
# complete_one.lua) on awaited jobs one at a time; this measures, on the same
# kind of redis-server under callgrind, stand-in enqueue and completion
# scripts (a throwaway function library) that do nothing but the fewest
# commands for what they keep, in the same loop: a producer enqueues, a
# worker subscribed to its push channel gets the push, completes, and the
# producer, subscribed to its reply channel, gets the outcome; then the next
# job (the peers' callgrind/seq_*.js and rjq-bench awaited-seq). Three tiers,
# each the one before plus something of rjq's:
#
#   a  the issue's floor list, minimal keys and arguments. Enqueue: LPOP idle
#      (take an idle slot: one entry per free slot, the worker's push channel),
#      HSET payload, ZADD leases <deadline> "<id> <token>" (lease and fencing
#      token in one entry), PUBLISH the push "<id> <token> <channel>\n<payload>"
#      (from 2 KiB the payload as a message of its own after the head, as
#      rjq's push format 8: one PUBLISH more, no copy of it made in Lua).
#      The id is made by the client and the deadline by its clock.
#      Completion: ZREM leases "<id> <token>" (the fencing check and the
#      release in one), HSET result, PUBLISH the outcome, RPUSH idle (the slot
#      offered again). 4 + 4 commands, 2 script calls.
#   b  a, and what rjq keeps per job that the list does not, in rjq's column
#      layout: TIME (the times and the deadline by the server's clock), one
#      EXISTS probe a call (enqueue: jobs waiting, a monitor, a pause mark;
#      completion: a monitor, run-time limits, groups), the id from the
#      queue's counter (HINCRBY stats seq, the first write), the job's state
#      record with its times and reply channel ("active 1 <token> @<t>,<t>,
#      <channel>", then "completed 1 <token> @<q>,<s>,<e>"), the retention
#      count and index entry (HINCRBY stats retained, RPUSH completed
#      "<stamp> <id>"), and the bad-input promise (each write's reply checked
#      through redis.pcall, the writes before a refused one undone, a push
#      heard by nobody undone: code that runs only then). The completion
#      reads no state: the times, the channel and the lease's deadline (for
#      an exact undo) travel in the push and come back with the completion
#      (docs/scripts.md "Queue format 2", (4)); the result is written with
#      HSETNX before the lease's release, as complete_one does.
#      8 + 9 commands, 2 script calls.
#   c  b with rjq's key and argument layout: enqueue_one's 11 keys and 5
#      arguments, complete_one's 14 keys and 10 arguments (the times and
#      channel packed in its "<attempt> <token>" argument, parsed back).
#   b-time, b-probe, b-seq, b-state, b-ret, b-check: b less one of its
#      additions (the clock by TIME; the EXISTS probes; the id by the
#      counter, else the token is the id; the state record; the retention
#      count and index entry; redis.pcall with each reply checked, else
#      redis.call): b minus each prices that addition.
#   b-none: all six left out: a's 4 + 4 commands with b's code, keys and
#      arguments (b-none minus a: b's shape alone).
#   b-cuts: b with the cuts that keep every record: the producer makes the
#      id (no HINCRBY seq), no retention count (RPUSH completed answers the
#      index's length), no active state written by the enqueue (the lease
#      entry's score less the lease is the start; the times travel with the
#      job): 6 + 8 commands. b-cuts-time: and the clients' clock for the
#      times and the deadline instead of TIME (5 + 7; a constant stands in
#      for them: passing a clock would add an argument, ~1k a call).
#
# Each case: the payload, result and state columns filled with PREFILL
# entries (1000: hashes past hash-max-listpack-entries, as a queue's
# columns are once a few hundred jobs are retained; with fewer, each HSET
# scans a listpack, and the figure grows with the run's length), WARM jobs
# unmeasured, then N jobs one at a time (a small Python
# client, four connections: producer, its subscriber, worker, its
# subscriber), measured between callgrind_control zero and dump, less the
# idle server's rate over the same time; commands per job from INFO
# commandstats around the window (INFO left out).
# With PEERS (an npm-installed copy of ../shared/peers, never modified) the
# peers' bee-queue case (callgrind/seq_beequeue.js) runs on the same server
# at each payload too.
#
# Usage: bench/callgrind_await_floor.sh [tier ...]   (default: a b c; "bee" for bee-queue)
# Environment: N (2000), WARM (50), PREFILL (1000), SIZES ("18 1024 16384"), CG_PORT (17581),
#              OUT (mktemp), PEERS (the bee-queue rows; none without it),
#              AFLOOR_FILES_ONLY (1: write the stand-ins to OUT and stop)
set -euo pipefail
N=${N:-2000}
WARM=${WARM:-50}
PREFILL=${PREFILL:-1000}
SIZES=${SIZES:-18 1024 16384}
export CG_PORT=${CG_PORT:-17581}
OUT=${OUT:-$(mktemp -d /tmp/rjq-afloor.XXXXXX)}
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/cg_redis.sh
. "$here/cg_redis.sh"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
tiers=("$@")
if [ ${#tiers[@]} -eq 0 ]; then
  tiers=(a b c)
  [ -z "${PEERS:-}" ] || tiers+=(bee)
fi

cat > "$OUT/afloor.lua" << 'EOF'
#!lua name=rjqafloor
local function now_text() -- (ms, as text, from the server's clock: rjq's now_text)
  local t = redis.call('TIME')
  return t[1] .. string.sub(string.format('%06d', t[2]), 1, 3)
end
local function bad(r) return type(r) == 'table' and r.err end
-- The push: "<head>\n<payload>" in one message; from 2 KiB the payload
-- as a message of its own after the head (as rjq's push format 8: no
-- copy of a large payload made in Lua). Returns the first PUBLISH's reply.
local function push(w, head, payload)
  if #payload < 2048 then return redis.call('PUBLISH', w, head .. '\n' .. payload) end
  local n = redis.call('PUBLISH', w, head)
  if n ~= 0 then redis.call('PUBLISH', w, payload) end
  return n
end

-- a: the issue's list. KEYS idle, payloads, leases; ARGV id, token,
-- deadline, reply channel, payload
redis.register_function('enq_a', function(KEYS, ARGV)
  local id, tok = ARGV[1], ARGV[2]
  local w = redis.call('LPOP', KEYS[1])
  if not w then return 0 end -- (no idle slot: the job would go to ready; not this bench's path)
  redis.call('HSET', KEYS[2], id, ARGV[5])
  redis.call('ZADD', KEYS[3], ARGV[3], id .. ' ' .. tok)
  push(w, id .. ' ' .. tok .. ' ' .. ARGV[4], ARGV[5])
  return 1
end)
-- KEYS idle, leases, result; ARGV id, token, worker (its push channel),
-- reply channel, result
redis.register_function('cmp_a', function(KEYS, ARGV)
  local id = ARGV[1]
  if redis.call('ZREM', KEYS[2], id .. ' ' .. ARGV[2]) == 0 then return 0 end
  redis.call('HSET', KEYS[3], id, ARGV[5])
  redis.call('PUBLISH', ARGV[4], 'completed ' .. id .. '\n' .. ARGV[5])
  redis.call('RPUSH', KEYS[1], ARGV[3])
  return 1
end)

-- b and c share these, from their own keys and arguments (positional:
-- no table of keys, no closure per call; the undo runs only on a refusal).
-- make_b(F) makes b's pair; F's flags (all true for b) leave out one of
-- b's additions at a time, to price it: time (TIME: else a constant
-- clock), probe (the EXISTS), seq (the id from the counter: else the
-- token is the id), state (the state record), ret (the retention count
-- and index entry), check (redis.pcall and each reply checked: else
-- redis.call). They are upvalues: a test costs a few instructions.
-- Two more leave a command out and keep the record: nocount (no
-- retention count: RPUSH completed answers the index's length) and
-- noactive (no active state written by the enqueue: the lease entry's
-- score less the lease is the start, and the times travel with the job;
-- a format change for every reader of an active job's state).
local function make_b(F)
  local call -- (redis.pcall is not there while the library loads)
  local function clock() if F.time then return now_text() end return '1764000000000' end
  local function enq_undo(n, idle, payloads, stats, state, id, w)
    if n >= 4 and F.state and not F.noactive then redis.call('HDEL', state, id) end
    if n >= 3 then redis.call('HDEL', payloads, id) end
    if n >= 2 then redis.call('LPUSH', idle, w) end
    if F.seq then redis.call('HINCRBY', stats, 'seq', -1) end
  end
  local function enqueue(idle, payloads, leases, stats, state, ready, prio, monitored, paused, ch, tok, payload, lease)
    call = F.check and redis.pcall or redis.call
    local now = clock()
    if F.probe and redis.call('EXISTS', ready, prio, monitored, paused) ~= 0 then
      return -1 -- (jobs waiting, a monitor, a pause: the general script's work; not this bench's path)
    end
    local id = tok
    if F.seq then
      id = call('HINCRBY', stats, 'seq', 1) -- (the first write: refused, nothing written)
      if bad(id) then return id end
      id = string.format('%d', id) -- (text once: a Lua number is formatted again at each use)
    end
    local w = call('LPOP', idle)
    if bad(w) then enq_undo(1, idle, payloads, stats, state, id, w); return w end
    if not w then return -1 end -- (no idle slot: to ready; not this bench's path)
    local r = call('HSET', payloads, id, payload)
    if bad(r) then enq_undo(2, idle, payloads, stats, state, id, w); return r end
    local times = ' @' .. now .. ',' .. now .. ', ' .. ch
    if F.state and not F.noactive then
      r = call('HSET', state, id, 'active 1 ' .. tok .. times)
      if bad(r) then enq_undo(3, idle, payloads, stats, state, id, w); return r end
    end
    local deadline = string.format('%d', now + lease)
    local member = id .. ' ' .. tok
    r = call('ZADD', leases, deadline, member)
    if bad(r) then enq_undo(4, idle, payloads, stats, state, id, w); return r end
    if push(w, member .. ' ' .. deadline .. times, payload) == 0 and F.check then
      redis.call('ZREM', leases, member) -- (heard by nobody: undone, the slot dropped)
      enq_undo(4, idle, payloads, stats, state, id, w)
      redis.call('LPOP', idle)
      return -1
    end
    return id
  end
  local function cmp_undo(k, idle, leases, stats, completed, result, id, member, deadline)
    if k >= 5 then redis.call('ZADD', leases, deadline, member) end
    if k >= 4 then redis.call('RPOP', idle) end
    if k >= 3 then redis.call('HDEL', result, id) end
    if k >= 2 and F.ret then redis.call('RPOP', completed) end
    if F.ret and not F.nocount then redis.call('HINCRBY', stats, 'retained', -1) end
  end
  local function complete(idle, leases, stats, completed, result, state, monitored, deadlines, gjob,
                          id, tok, times, ch, w, deadline, res)
    call = F.check and redis.pcall or redis.call
    local now = clock()
    if F.probe and redis.call('EXISTS', monitored, deadlines, gjob) ~= 0 then
      return -1 -- (the general completion's work; not this bench's path)
    end
    local member = id .. ' ' .. tok
    local r
    if F.ret then
      if not F.nocount then
        r = call('HINCRBY', stats, 'retained', 1) -- (the first write)
        if bad(r) then return r end
      end
      r = call('RPUSH', completed, now .. ' ' .. id) -- (nocount: its reply, the index's length, is the count)
      if bad(r) then cmp_undo(1, idle, leases, stats, completed, result, id, member, deadline); return r end
    end
    r = call('HSETNX', result, id, res)
    if bad(r) then cmp_undo(2, idle, leases, stats, completed, result, id, member, deadline); return r end
    local wrote = r == 1 and 3 or 2
    r = call('RPUSH', idle, w)
    if bad(r) then cmp_undo(wrote, idle, leases, stats, completed, result, id, member, deadline); return r end
    r = call('ZREM', leases, member) -- the fencing check and the release
    if bad(r) or r == 0 then
      if wrote == 3 then cmp_undo(4, idle, leases, stats, completed, result, id, member, deadline)
      else redis.call('RPOP', idle); cmp_undo(2, idle, leases, stats, completed, result, id, member, deadline) end
      return bad(r) and r or 0
    end
    if F.state then
      r = call('HSET', state, id, 'completed 1 ' .. tok .. ' ' .. times .. now)
      if bad(r) then cmp_undo(5, idle, leases, stats, completed, result, id, member, deadline); return r end
    end
    redis.call('PUBLISH', ch, 'completed ' .. id .. '\n' .. res)
    return 1
  end
  return enqueue, complete
end

local enqueue, complete = make_b({ time = true, probe = true, seq = true, state = true, ret = true, check = true })
-- b less one of its additions: enq_b_<flag>, cmp_b_<flag>; _none: all six
-- left out (a's commands with b's code, keys and arguments); _cuts: b with
-- the cuts that keep every record (the producer's id, nocount, noactive),
-- _cuts_time: and the clients' clock instead of the server's (b's keys and
-- arguments)
local offs = { 'time', 'probe', 'seq', 'state', 'ret', 'check', 'none', 'cuts', 'cuts_time' }
for i = 1, #offs do -- (ipairs is not there while the library loads)
  local off = offs[i]
  local F = { time = true, probe = true, seq = true, state = true, ret = true, check = true }
  F[off] = false
  if off == 'none' then F = {} end
  if off == 'cuts' or off == 'cuts_time' then -- (the cuts that keep every record)
    F = { time = off == 'cuts', probe = true, state = true, ret = true, check = true, nocount = true, noactive = true }
  end
  local e, c = make_b(F)
  redis.register_function('enq_b_' .. off, function(KEYS, ARGV)
    return e(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9],
             ARGV[1], ARGV[2], ARGV[3], ARGV[4])
  end)
  redis.register_function('cmp_b_' .. off, function(KEYS, ARGV)
    return c(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9],
             ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
  end)
end

-- b: KEYS idle, payloads, leases, stats, state, ready, prio, monitored,
-- paused; ARGV reply channel, token, payload, lease ms
redis.register_function('enq_b', function(KEYS, ARGV)
  return enqueue(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9],
                 ARGV[1], ARGV[2], ARGV[3], ARGV[4])
end)
-- KEYS idle, leases, stats, completed, result, state, monitored, deadlines,
-- gjob; ARGV id, token, times "@<q>,<s>,", reply channel, worker,
-- deadline, result
redis.register_function('cmp_b', function(KEYS, ARGV)
  return complete(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9],
                  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
end)

-- c: enqueue_one's layout. KEYS ready, prio, stats, active, idle,
-- monitored, events, pcol, scol, wcol, meta; ARGV wake channel, reply
-- channel, token base, payload, format
redis.register_function('enq_c', function(KEYS, ARGV)
  return enqueue(KEYS[5], KEYS[8], KEYS[4], KEYS[3], KEYS[9], KEYS[1], KEYS[2], KEYS[6], KEYS[11],
                 ARGV[2], ARGV[3], ARGV[4], 30000)
end)
-- complete_one's layout. KEYS active, completed, stats, ready, prio, idle,
-- monitored, events, deadlines, groups, scol, rcol, wcol, dependents;
-- ARGV 1 prefix, 2 retention ms, 3 most kept, 4 the offer's field (the
-- worker), 5 epoch, 6 lease ms, 7 slots, 8 id, 9 "<attempt> <token>
-- <deadline> @<q>,<s>, <channel>", 10 result
redis.register_function('cmp_c', function(KEYS, ARGV)
  local tok, deadline, times, ch = string.match(ARGV[9], '^%d+ (%S+) (%d+) (@%d*,%d*,) (.*)$')
  return complete(KEYS[6], KEYS[1], KEYS[3], KEYS[2], KEYS[12], KEYS[11], KEYS[7], KEYS[9], KEYS[10] .. 'job',
                  ARGV[8], tok, times, ch, ARGV[4], deadline, ARGV[10])
end)
EOF

cat > "$OUT/drive.py" << 'EOF'
# drive.py port pid tier bytes warm n out prefill: awaited jobs one at a time over
# four connections; prints "<window s>" and writes commandstats to out.cs0/.cs1
import os, subprocess, sys, time
port, pid, tier, size, warm, n, out, prefill = (int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]),
                                               int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], int(sys.argv[8]))
from cg_resp import Conn
P, PS, W, WS = Conn(port), Conn(port), Conn(port), Conn(port)
push_ch, reply_ch, worker = '{q}:push:w1', '{q}:reply:p1', '{q}:push:w1'
P.call('FLUSHALL')
WS.call('SUBSCRIBE', push_ch)
PS.call('SUBSCRIBE', reply_ch)
P.call('RPUSH', '{q}:idle', worker) # one free slot of the worker
# the columns of a queue with jobs retained (hashes past hash-max-listpack-entries,
# as they are after a few hundred jobs: a listpack's HSET scans it)
P.call('EVAL', "for i = 1, tonumber(ARGV[1]) do local f = 'f' .. i; redis.call('HSET', KEYS[1], f, ARGV[2]); "
       "redis.call('HSET', KEYS[2], f, ''); redis.call('HSET', KEYS[3], f, ARGV[3]) end",
       3, '{q}:payload', '{q}:result', '{q}:state', prefill, 'x' * 18,
       'completed 1 p0.0 @1764000000000,1764000000000,1764000000001')
payload = b'x' * size
b_ek = ['{q}:idle', '{q}:payload', '{q}:active', '{q}:stats', '{q}:state', '{q}:ready', '{q}:prio',
        '{q}:monitored', '{q}:paused']
b_ck = ['{q}:idle', '{q}:active', '{q}:stats', '{q}:completed', '{q}:result', '{q}:state', '{q}:monitored',
        '{q}:deadlines', '{q}:groups:job']
c_ek = ['{q}:ready', '{q}:prio', '{q}:stats', '{q}:active', '{q}:idle', '{q}:monitored', '{q}:events',
        '{q}:payload', '{q}:state', '{q}:watchers', '{q}:meta']
c_ck = ['{q}:active', '{q}:completed', '{q}:stats', '{q}:ready', '{q}:prio', '{q}:idle', '{q}:monitored',
        '{q}:events', '{q}:deadlines', '{q}:groups:', '{q}:state', '{q}:result', '{q}:watchers',
        '{q}:dependents']
seq = 0
def job():
    global seq
    seq += 1
    tok = 'p1.%d' % seq
    if tier == 'a':
        r = P.call('FCALL', 'enq_a', 3, '{q}:idle', '{q}:payload', '{q}:active',
                   seq, tok, int(time.time() * 1000) + 30000, reply_ch, payload)
    elif tier[0] == 'b':
        r = P.call('FCALL', 'enq_' + tier.replace('-', '_'), len(b_ek), *b_ek, reply_ch, tok, payload, 30000)
    else:
        r = P.call('FCALL', 'enq_c', len(c_ek), *c_ek, '{q}:wake', reply_ch, tok, payload, 2)
    assert (isinstance(r, int) and r > 0) or isinstance(r, bytes), r # (the id: a number or text)
    m = WS.read()
    assert m[0] == b'message', m
    if b'\n' in m[2]:
        head, body = m[2].split(b'\n', 1)
    else: # (from 2 KiB the payload comes as a message of its own)
        head, body = m[2], WS.read()[2]
    assert len(body) == size
    h = head.decode().split(' ')
    if tier == 'a':
        c = W.call('FCALL', 'cmp_a', 3, '{q}:idle', '{q}:active', '{q}:result', h[0], h[1], worker, h[2], '')
    elif tier[0] == 'b':
        c = W.call('FCALL', 'cmp_' + tier.replace('-', '_'), len(b_ck), *b_ck, h[0], h[1], h[3], h[4], worker, h[2], '')
    else:
        c = W.call('FCALL', 'cmp_c', len(c_ck), *c_ck, '{q}:job:', -1, 1000, worker, 1, 30000, 1, h[0],
                   '1 %s %s %s %s' % (h[1], h[2], h[3], h[4]), '')
    assert c == 1, c
    o = PS.read()
    assert o[0] == b'message' and o[2].startswith(b'completed ' + h[0].encode()), o
for _ in range(warm): job()
def stats(f):
    with open(f, 'wb') as o: o.write(P.call('INFO', 'commandstats'))
# pid "native" (bench/native_await_floor.sh): a server not under callgrind,
# its CPU seconds (INFO cpu used_cpu_user + used_cpu_sys) written to
# out.cpu around the window, the jobs paced at RATE a second (0: back to
# back) as the latency cases' producers are
native = pid == 'native'
rate = float(os.environ.get('RATE', '0')) if native else 0
def cpu():
    f = dict(l.split(':', 1) for l in P.call('INFO', 'cpu').decode().split('\r\n') if ':' in l)
    return float(f['used_cpu_user']) + float(f['used_cpu_sys'])
stats(out + '.cs0')
if native: c0 = cpu()
else: subprocess.run(['callgrind_control', '-z', pid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
t0 = time.time()
for i in range(n):
    if rate > 0:
        d = t0 + i / rate - time.time()
        if d > 0: time.sleep(d)
    job()
t1 = time.time()
if native:
    with open(out + '.cpu', 'w') as o: o.write('%.6f %.6f\n' % (cpu() - c0, t1 - t0))
else: subprocess.run(['callgrind_control', '--dump=' + out.rsplit('/', 1)[1], pid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
t2 = time.time()
stats(out + '.cs1')
with open(out + '.enc', 'w') as o:
    for k in ('{q}:payload', '{q}:result', '{q}:state', '{q}:active', '{q}:completed', '{q}:idle'):
        o.write('%s %s %s\n' % (k, P.call('TYPE', k).decode(), P.call('OBJECT', 'ENCODING', k)))
print('%.3f' % (t2 - t0))
EOF

# AFLOOR_FILES_ONLY=1: write the stand-ins ($OUT/afloor.lua, $OUT/drive.py)
# and stop: bench/native_await_floor.sh runs them on a server not under
# callgrind
[ "${AFLOOR_FILES_ONLY:-0}" != 1 ] || exit 0

if redis-cli -p "$CG_PORT" ping > /dev/null 2>&1; then
  echo "callgrind_await_floor.sh: a server already answers on port $CG_PORT (CG_PORT): not ours" >&2
  exit 1
fi
cg_redis_start "$CG_PORT" callgrind_await_floor.sh
pid=$CG_REDIS_PID
# (a script call may take seconds of wall clock under callgrind on a loaded machine)
redis-cli -p "$CG_PORT" config set busy-reply-threshold 600000 > /dev/null
loaded=$(redis-cli -p "$CG_PORT" -x FUNCTION LOAD < "$OUT/afloor.lua")
[ "$loaded" = rjqafloor ] || { echo "callgrind_await_floor.sh: FUNCTION LOAD: $loaded" >&2; exit 1; }

# the idle server's rate (cron, valgrind's clock), subtracted
idle=$(cg_idle_rate 3)

# Commands and script calls per job of the window tagged $1 (INFO left out).
cmds() {
  awk -F'[:,=]' -v n="$N" 'FNR == 1 { f++ }
    /^cmdstat_/ { c = substr($1, 9); if (c == "info") next; if (f == 1) a[c] = $3; else b[c] = $3 }
    END { for (c in b) { d = b[c] - a[c]; tot += d; if (c ~ /^(fcall|fcall_ro|evalsha|eval|evalsha_ro|eval_ro)$/) s += d }
          printf "%.1f %.2f", tot / n, s / n }' "$OUT/$1.cs0" "$OUT/$1.cs1" | tr -d '\r'
}

# $1 tier, $2 bytes: "instructions/job (k) commands/job scripts/job"
measure() {
  local tag=$1-$2 secs ir
  rm -f "$OUT/$tag".*
  if [ "$1" = bee ]; then
    redis-cli -p "$CG_PORT" flushall > /dev/null
    # (bee-queue's jobs hash filled as the columns are for the stand-ins)
    redis-cli -p "$CG_PORT" eval "for i = 1, tonumber(ARGV[1]) do redis.call('HSET', KEYS[1], 'f' .. i, ARGV[2]) end" \
      1 bq:bench:jobs "$PREFILL" '{"data":"xxxxxxxxxxxxxxxxxx","options":{"timestamp":1764000000000,"stacktraces":[]},"status":"succeeded"}' > /dev/null
    cp "$PEERS/callgrind/cg_mark.sh" "$OUT/cg_mark.sh" 2> /dev/null || cp /work/shared/peers/callgrind/cg_mark.sh "$OUT/cg_mark.sh"
    chmod u+wx "$OUT/cg_mark.sh"
    (cd "$PEERS" && CG_MARK=$OUT/cg_mark.sh CG_DIR=$OUT CG_TAG=$tag CG_REDIS_PID=$pid \
      REDIS_PORT=$CG_PORT N=$N PAYLOAD_BYTES=$2 CG_ZERO_SNAP=1 CG_DUMP_SNAP=2 \
      node -r ./callgrind/cg_hook.js callgrind/seq_beequeue.js > "$OUT/$tag.json" 2> "$OUT/$tag.err")
    secs=$(awk -v a="$(cat "$OUT/$tag.t0")" -v b="$(cat "$OUT/$tag.t1")" 'BEGIN { printf "%.3f", b - a }')
  else
    secs=$($PY "$OUT/drive.py" "$CG_PORT" "$pid" "$1" "$2" "$WARM" "$N" "$OUT/$tag" "$PREFILL")
  fi
  ir=$(cg_dumped "$tag")
  awk -v i="$ir" -v r="$idle" -v s="$secs" -v n="$N" -v c="$(cmds "$tag")" \
    'BEGIN { split(c, x, " "); printf "%.1f %s %s", (i - r * s) / n / 1000, x[1], x[2] }'
}

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') under callgrind, $N awaited jobs one at a time (after $WARM), output in $OUT"
echo "idle server: $idle instructions/s (subtracted)"
echo
echo "| tier | bytes | Redis instr/job | commands/job | script calls/job |"
echo "|---|---:|---:|---:|---:|"
for s in $SIZES; do
  for tr in "${tiers[@]}"; do
    read -r k c sc <<< "$(measure "$tr" "$s")"
    printf "| %-7s | %5s | %8.1fk | %5.1f | %4.2f |\n" "$tr" "$s" "$k" "$c" "$sc"
  done
done
