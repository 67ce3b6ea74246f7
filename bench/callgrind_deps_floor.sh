#!/bin/bash
# bench/callgrind_deps_floor.sh: the least Redis can spend on a job with one
# dependency in ANOTHER queue (another hash slot), beyond the plain job it
# also is (bench/README.md "The floor of a dependency in another queue");
# MODE=same: in the SAME queue (bench/README.md "The floor of a dependency
# in the same queue", the stand-in described at the same-queue part below).
#
# A stand-in of the fewest script calls and commands that keep issue 39's
# guarantees for an other-queue dependent P (queue B) of a job D (queue A):
# - registration race-free: one call on A's slot reads D's state and writes
#   D's dependents entry in the same script (an unfinished D records P; a
#   finished one is answered at once);
# - release once: one call on B's slot reads P's state (still waiting?)
#   before it moves P to ready (ZREM waiting, RPUSH ready, state ready), so
#   a release sent again changes nothing;
# - retention until release: D's completion (a call it makes anyway) reads
#   D's dependents entry (one command more: the entries the client
#   carries); the entry stays, so D's record is kept and a sweep can find an
#   unreleased one by scanning the entries (no index per job); after the
#   release the entry goes (HDEL, carried by the client's next call to A:
#   no call of its own) - the cheapest and, as its own call, the dearer.
# P's own enqueue is a plain one that adds P to `waiting` instead of
# `ready` (the same count of commands) and carries the dependency's queue
# and id (two arguments more, kept in P's state value: no command more).
#
# Each step runs its commands with all its jobs' ids at once (a command per
# step, not per job: the fewest), K jobs per call (what a client gathers in
# one loop turn: deps-bench's about 33, or 1 for a lone job), with real
# keys and members (distinct ids, the members present), the calls sent
# with redis-cli --pipe and counted by segment. The extra per dependent
# job is set against the plain job of deps-bench (its `plain` mode, run on
# the same server): floor ratio = 1 + extra / plain.
#
# MODE=same: dependent P of job D, both of queue Q (one slot), so every
# step rides a call the jobs make anyway (no call of its own):
# - registration race-free, in P's enqueue call: HMGET D's state (a
#   finished D is answered at once) and HSET D's dependents entry (P);
#   P's enqueue is otherwise a plain one writing `waiting` instead of
#   `ready` (its index entry and its state: the same count of commands),
#   with D's id one argument more, kept in P's state (its outcome read
#   from D's record by rjq_job_dependencies: no command more);
# - release once, in D's completion call (the same script: nothing runs
#   between): HMGET D's dependents entry, HMGET P's state (still waiting?
#   its enqueue time and policy kept), HSET P's state ready, ZREM waiting,
#   RPUSH ready, HDEL the entry; D's record is kept until then trivially,
#   and an unfinished D's entry is what a dead or cancelled D's script
#   reads to apply P's policy. A column without the HMGET of P's state
#   (the entry carrying what the release writes, a cancel of P editing
#   the entry) bounds what that read costs.
# Tiers: g, the guarantees alone (short keys and values); r, the same
# commands with rjq's key names, values and deps_add's arguments per job
# (policy, count, queue, id; D kept in P's state as "<queue>:<id>"); re, r
# and deps_add's HMGET of the entry before it writes it (a second
# dependent of D appends); rd, r with D kept in its own column instead
# (deps_add's HSET of the dependencies list, the release's HMGET of it);
# c, rjq's commands: both. Two more floors for a D of several dependents
# (the registration must learn that D has an entry, not write it blind):
# ge, g and the entry read as its own command (HMGET dependents); gs, the
# entry kept in the state hash beside D's state (field "<D>+"), read in
# the registration's HMGET of D's state (one argument more). KE: the jobs of an enqueue call when not K
# (deps-bench `same`: 500 a deps_add call, about 32 a completion call).
#
# Usage: bench/callgrind_deps_floor.sh [BUILD]   (BUILD holds deps-bench)
# Environment: N (dependents, default 2000), KS ("1 2 4 8 33"), CG_PORT (17462),
#   OUT (mktemp), REAL=1 also runs deps-bench `dep N` (`same N` with
#   MODE=same: the real path), MODE (other, or same), TIERS ("g ge gs r re rd c", same), KE.
set -euo pipefail
MODE=${MODE:-other}
TIERS=${TIERS:-"g ge gs r re rd c"}
BUILD=${1:-build}
N=${N:-2000}
KS=${KS:-"1 2 4 8 33"}
CG_PORT=${CG_PORT:-17462}
OUT=${OUT:-$(mktemp -d /tmp/rjq-depsfloor.XXXXXX)}
PY=/usr/bin/python3
# shellcheck source=bench/cg_redis.sh
. "$(dirname "$0")/cg_redis.sh"
mkdir -p "$OUT"

cat > "$OUT/depsfloor.lua" << 'EOF'
#!lua name=rjqdepsfloor
redis.register_function('f_empty', function(KEYS, ARGV) return 0 end)
-- registration on A: per job D's id and the entry "B P"
redis.register_function('f_reg', function(KEYS, ARGV)
  local ids, fv = {}, {}
  for i = 1, #ARGV, 2 do ids[#ids + 1] = ARGV[i]; fv[#fv + 1] = ARGV[i]; fv[#fv + 1] = ARGV[i + 1] end
  local s = redis.call('HMGET', KEYS[1], unpack(ids))
  redis.call('HSET', KEYS[2], unpack(fv))
  return s
end)
-- the completion's extra on A: D's dependents entries (in its reply)
redis.register_function('f_cplus', function(KEYS, ARGV)
  return redis.call('HMGET', KEYS[1], unpack(ARGV))
end)
-- release on B: per job P's id
redis.register_function('f_rel', function(KEYS, ARGV)
  local s = redis.call('HMGET', KEYS[1], unpack(ARGV))
  local fv = {}
  for i = 1, #ARGV do fv[#fv + 1] = ARGV[i]; fv[#fv + 1] = 'ready 0 @1764000000000,,' end
  redis.call('ZREM', KEYS[2], unpack(ARGV))
  redis.call('RPUSH', KEYS[3], unpack(ARGV))
  redis.call('HSET', KEYS[1], unpack(fv))
  return #s
end)
-- the entries' removal on A: per job D's id
redis.register_function('f_done', function(KEYS, ARGV)
  return redis.call('HDEL', KEYS[1], unpack(ARGV))
end)
-- MODE=same, in P's enqueue: KEYS state, dependents[, deps]; ARGV[1]
-- the tier, ARGV[2] the arguments per job (P's id first, D's id last),
-- ARGV[3] the entry's text before P's id, ARGV[4] the list's before D's
-- id (tiers rd, c), then the jobs
redis.register_function('f_sreg', function(KEYS, ARGV)
  local t, w, ep, lh = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
  local e, c = t == 're' or t == 'c' or t == 'ge', t == 'rd' or t == 'c'
  local gs = t == 'gs'
  local ds, fv, dl = {}, {}, {}
  local n = 0
  for i = 5, #ARGV, w do
    n = n + 1
    local d = ARGV[i + w - 1]
    if gs then ds[2 * n - 1] = d; ds[2 * n] = d .. '+'; d = d .. '+' else ds[n] = d end
    fv[2 * n - 1] = d
    if ep == '' then fv[2 * n] = ARGV[i] else fv[2 * n] = ep .. ARGV[i] end
    if c then dl[2 * n - 1] = ARGV[i]; dl[2 * n] = lh .. d end
  end
  local s = redis.call('HMGET', KEYS[1], unpack(ds))
  if e then redis.call('HMGET', KEYS[2], unpack(ds)) end
  redis.call('HSET', KEYS[2], unpack(fv))
  if c then redis.call('HSET', KEYS[3], unpack(dl)) end
  return #s
end)
-- MODE=same, in D's completion: KEYS dependents, state, waiting, ready[,
-- deps]; ARGV[1] the tier or 'g0' (no read of P's state), ARGV[2] the
-- entry's prefix before P's id, ARGV[3] P's ready state value, then D's ids
redis.register_function('f_scomp', function(KEYS, ARGV)
  local t, cut, rv = ARGV[1], #ARGV[2] + 1, ARGV[3]
  local ds = {unpack(ARGV, 4)}
  if t == 'gs' then for j = 1, #ds do ds[j] = ds[j] .. '+' end end
  local e = redis.call('HMGET', KEYS[1], unpack(ds))
  local ps, st = {}, {}
  for j = 1, #e do ps[j] = string.sub(e[j], cut); st[2 * j - 1] = ps[j]; st[2 * j] = rv end
  if t ~= 'g0' then redis.call('HMGET', KEYS[2], unpack(ps)) end
  if t == 'c' or t == 'rd' then redis.call('HMGET', KEYS[5], unpack(ps)) end
  redis.call('HSET', KEYS[2], unpack(st))
  redis.call('ZREM', KEYS[3], unpack(ps))
  redis.call('RPUSH', KEYS[4], unpack(ps))
  redis.call('HDEL', KEYS[1], unpack(ds))
  return #ps
end)
EOF

cg_redis_start "$CG_PORT" callgrind_deps_floor.sh
pid=$CG_REDIS_PID
cli() { redis-cli -p "$CG_PORT" "$@"; }
cli -x FUNCTION LOAD < "$OUT/depsfloor.lua" > /dev/null

# the instructions of running $1 (a command file) through redis-cli --pipe
# (its wall time appended to $OUT/wall: the server's own periodic
# work over it is counted too, estimated below from an idle second)
seg() {
  local t0 t1
  callgrind_control -z "$pid" > /dev/null 2>&1
  t0=$(date +%s.%N)
  cli --pipe < "$1" > "$OUT/pipe.log" 2>&1 || { cat "$OUT/pipe.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  grep -q 'errors: 0' "$OUT/pipe.log" || { cat "$OUT/pipe.log" >&2; exit 1; }
  callgrind_control --dump="$2" "$pid" > /dev/null 2>&1
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }' >> "$OUT/wall"
  cg_dumped "$2"
}

# RESP command files: gen.py K STEP > file
cat > "$OUT/gen.py" << 'EOF'
import sys
from cg_resp import enc
n, k, step = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
out = sys.stdout.buffer
def cmd(*w): out.write(enc(*w))
if step == 'setup':
    for i in range(n):
        cmd('HSET', '{a}:s', 'c%d' % i, 'active 1 c.w.t1 @1764000000000,1764000000000,')
        cmd('HSET', '{b}:s', 'p%d' % i, 'waiting 0 @1764000000000,,')
        cmd('ZADD', '{b}:waiting', 1764000000000 + i, 'p%d' % i)
for j in range(0, n, k):
    r = range(j, min(j + k, n))
    c = ['c%d' % i for i in r]
    p = ['p%d' % i for i in r]
    if step == 'reg':
        a = []
        for i in r: a += ['c%d' % i, 'b p%d' % i]
        cmd('FCALL', 'f_reg', 2, '{a}:s', '{a}:dependents', *a)
    elif step == 'cbase':   # the completion's own ids, no command
        cmd('FCALL', 'f_empty', 1, '{a}:dependents', *c)
    elif step == 'cplus':
        cmd('FCALL', 'f_cplus', 1, '{a}:dependents', *c)
    elif step == 'rel':
        cmd('FCALL', 'f_rel', 3, '{b}:s', '{b}:waiting', '{b}:ready', *p)
    elif step == 'empty':   # a call carrying nothing of the dependents
        cmd('FCALL', 'f_empty', 1, '{a}:dependents')
    elif step == 'done':
        cmd('FCALL', 'f_done', 1, '{a}:dependents', *c)
    elif step == 'eplus':   # the enqueue's two arguments more per job
        a = []
        for i in r: a += ['a', 'c%d' % i]
        cmd('FCALL', 'f_empty', 1, '{b}:s', *a)
EOF

# MODE=same's RESP command files: gens.py N K TIER STEP > file
cat > "$OUT/gens.py" << 'EOF'
import sys
from cg_resp import enc
n, k, tier, step = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
out = sys.stdout.buffer
def cmd(*w): out.write(enc(*w))
g = tier in ('g', 'ge', 'gs')
# the keys, the values and the per-job arguments: short, or rjq's
# (src/keys.def; deps_add.lua: id, payload, options, policy, count,
# queue, id; a plain enqueue: id, payload, options)
K = {x: ('{q}:%s' if g else 'rjq:{bc}:%s') % x
     for x in ('s', 'dependents', 'waiting', 'ready', 'deps')}
if not g: K['s'] = 'rjq:{bc}:state'
ep = '' if g else 'bc '
lh = '' if g else 'fail 0 0\nw bc '
inst = tier in ('g', 'r', 're')   # D kept in P's state, not in the deps column
stamp = '@1764000000000'
def plain(i): return ['p%d' % i] if g else ['p%d' % i, 'x', '']
def dep(i): return ['c%d' % i] if g else ['fail', '1', 'bc', 'c%d' % i]
if step == 'setup':   # D active; P as its plain enqueue leaves it, waiting
    for i in range(n):
        cmd('HSET', K['s'], 'c%d' % i, 'active 1 c.w.t1 %s,%s' % (stamp, stamp))
        cmd('HSET', K['s'], 'p%d' % i, ('waiting 0 %s c%d' % (stamp, i)) if g else
            ('waiting 0 %s bc:c%d' % (stamp, i)) if inst else 'waiting 0 ' + stamp)
        cmd('ZADD', K['waiting'], 1764000000000 + i, 'p%d' % i)
for j in range(0, n, k):
    r = range(j, min(j + k, n))
    if step == 'ebase':   # P's plain arguments, no command
        a = []
        for i in r: a += plain(i)
        cmd('FCALL', 'f_empty', 1, K['s'], *a)
    elif step == 'sreg':
        a = []
        for i in r: a += plain(i) + dep(i)
        w = len(plain(0)) + len(dep(0))
        cmd('FCALL', 'f_sreg', 3, K['s'], K['s' if tier == 'gs' else 'dependents'], K['deps'], tier, w, ep, lh, *a)
    elif step == 'cbase':   # the completion's own ids, no command
        cmd('FCALL', 'f_empty', 1, K['dependents'], *['c%d' % i for i in r])
    elif step in ('scomp', 'scomp0'):
        cmd('FCALL', 'f_scomp', 5, K['s' if tier == 'gs' else 'dependents'], K['s'], K['waiting'], K['ready'], K['deps'],
            'g0' if step == 'scomp0' else tier, ep, ('ready 0 %s c0' % stamp) if g else
            ('ready 0 %s bc:c0' % stamp) if inst else 'ready 0 ' + stamp,
            *['c%d' % i for i in r])
EOF

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') under callgrind, N=$N dependents, output in $OUT"
echo
# deps-bench's plain job on this server (its jobs: N children, no dependents)
cli FLUSHALL > /dev/null
REDIS_URL="redis://127.0.0.1:$CG_PORT" "$BUILD/deps-bench" plain 10 > /dev/null
cli FLUSHALL > /dev/null
callgrind_control -z "$pid" > /dev/null 2>&1
REDIS_URL="redis://127.0.0.1:$CG_PORT" "$BUILD/deps-bench" plain "$N" > "$OUT/plain.txt"
callgrind_control --dump=plain "$pid" > /dev/null 2>&1
plain=$(cg_dumped plain)
plainj=$(awk -v a="$plain" -v n="$N" 'BEGIN { printf "%.1f", a / n / 1000 }')
echo "deps-bench plain $N: $plain instructions, ${plainj}k per plain job"
if [ "${REAL:-0}" = 1 ]; then
  cli FLUSHALL > /dev/null
  callgrind_control -z "$pid" > /dev/null 2>&1
  real=dep
  [ "$MODE" = same ] && real=same
  REDIS_URL="redis://127.0.0.1:$CG_PORT" "$BUILD/deps-bench" "$real" "$N" > "$OUT/dep.txt"
  callgrind_control --dump=dep "$pid" > /dev/null 2>&1
  dep=$(cg_dumped dep)
  awk -v d="$dep" -v p="$plain" -v n="$N" -v m="$real" 'BEGIN { x = (d - p) / n; printf "deps-bench %s %d: %d instructions, %.1fk per dependent job, %.2fx plain\n", m, n, d, x / 1000, x / (p / n) }'
fi
# the server idle (its periodic work, and callgrind's control): per second
idle=$(cg_idle_rate 5)
echo "idle server: $idle instructions a second"
echo
if [ "$MODE" = same ]; then
  # the keys a tier's run must leave: no entry, no job waiting, N ready
  check() {
    local p='rjq:{bc}' s=state
    case $1 in g*) p='{q}' s=s ;; esac
    if [ "$(cli HLEN "$p:dependents")" != 0 ] || [ "$(cli ZCARD "$p:waiting")" != 0 ] ||
      [ "$(cli HLEN "$p:$s")" != $((2 * N)) ] ||
      [ "$(cli LLEN "$p:ready")" != "$N" ]; then
      echo "callgrind_deps_floor.sh: the same-queue stand-in ($1, K=$2) left the keys wrong" >&2
      exit 1
    fi
  }
  echo "| tier | K jobs a call | registration in P's enqueue | read and release in D's completion | extra per dependent | floor ratio | release without P's state read | its ratio | idle work in it |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for t in $TIERS; do
    for k in $KS; do
      ke=${KE:-$k}
      for st in setup ebase sreg; do "$PY" "$OUT/gens.py" "$N" "$ke" "$t" "$st" > "$OUT/s$st.$t.$k.resp"; done
      for st in cbase scomp scomp0; do "$PY" "$OUT/gens.py" "$N" "$k" "$t" "$st" > "$OUT/s$st.$t.$k.resp"; done
      cli FLUSHALL > /dev/null
      cli --pipe < "$OUT/ssetup.$t.$k.resp" > /dev/null
      : > "$OUT/wall"
      eb=$(seg "$OUT/sebase.$t.$k.resp" "sebase$t$k")
      rg=$(seg "$OUT/ssreg.$t.$k.resp" "ssreg$t$k")
      cb=$(seg "$OUT/scbase.$t.$k.resp" "scbase$t$k")
      cp=$(seg "$OUT/sscomp.$t.$k.resp" "sscomp$t$k")
      check "$t" "$k"
      c0=0
      if [ "$t" = g ]; then
        cli FLUSHALL > /dev/null
        cli --pipe < "$OUT/ssetup.$t.$k.resp" > /dev/null
        cli --pipe < "$OUT/ssreg.$t.$k.resp" > /dev/null
        c0=$(seg "$OUT/sscomp0.$t.$k.resp" "sscomp0$t$k")
        check "$t" "$k"
      fi
      [ "$ke" = "$k" ] || k="$k (enqueue $ke)"
      awk -v n="$N" -v k="$k" -v t="$t" -v eb="$eb" -v rg="$rg" -v cb="$cb" -v cp="$cp" -v c0="$c0" \
          -v plain="$plain" -v idle="$idle" -v wall="$(awk '{ s += $1 } END { print s }' "$OUT/wall")" 'BEGIN {
        e = (rg - eb) / n; c = (cp - cb) / n; x = e + c; pj = plain / n
        z = "-"; zr = "-"
        if (c0 > 0) { z = sprintf("%.1fk", (c0 - cb) / n / 1000); zr = sprintf("%.2fx", 1 + (e + (c0 - cb) / n) / pj) }
        printf "| %s | %s | %.1fk | %.1fk | %.1fk | %.2fx | %s | %s | <= %.1fk |\n", t, k, e / 1000, c / 1000, x / 1000, 1 + x / pj, z, zr, idle * wall / n / 1000
      }'
    done
  done
  exit 0
fi
echo "| K jobs a call | register | completion's read | release | removal carried (own call) | enqueue's 2 args | extra per dependent | floor ratio | idle work in it |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for k in $KS; do
  cli FLUSHALL > /dev/null
  for s in setup reg cbase cplus rel empty 'done' eplus; do "$PY" "$OUT/gen.py" "$N" "$k" "$s" > "$OUT/$s.$k.resp"; done
  cli --pipe < "$OUT/setup.$k.resp" > /dev/null
  : > "$OUT/wall"
  reg=$(seg "$OUT/reg.$k.resp" "reg$k")
  cbase=$(seg "$OUT/cbase.$k.resp" "cbase$k")
  cplus=$(seg "$OUT/cplus.$k.resp" "cplus$k")
  rel=$(seg "$OUT/rel.$k.resp" "rel$k")
  empty=$(seg "$OUT/empty.$k.resp" "empty$k")
  done_=$(seg "$OUT/done.$k.resp" "done$k")
  eplus=$(seg "$OUT/eplus.$k.resp" "eplus$k")
  if [ "$(cli HLEN '{a}:dependents')" != 0 ] || [ "$(cli ZCARD '{b}:waiting')" != 0 ] ||
    [ "$(cli LLEN '{b}:ready')" != "$N" ]; then
    echo "callgrind_deps_floor.sh: the stand-in left the keys wrong" >&2
    exit 1
  fi
  awk -v n="$N" -v k="$k" -v reg="$reg" -v cb="$cbase" -v cp="$cplus" -v rel="$rel" -v em="$empty" \
      -v dn="$done_" -v ep="$eplus" -v plain="$plain" -v idle="$idle" \
      -v wall="$(awk '{ s += $1 } END { print s }' "$OUT/wall")" 'BEGIN {
    r = reg / n; c = (cp - cb) / n; l = rel / n; d = (dn - em) / n; dd = dn / n; e = (ep - em) / n
    x = r + c + l + d + e; pj = plain / n
    printf "| %d | %.1fk | %.1fk | %.1fk | %.1fk (%.1fk) | %.1fk | %.1fk (%.1fk) | %.2fx (%.2fx) | <= %.1fk |\n", k, r / 1000, c / 1000, l / 1000, d / 1000, dd / 1000, e / 1000, x / 1000, (x - d + dd) / 1000, 1 + x / pj, 1 + (x - d + dd) / pj, idle * wall / n / 1000
  }'
done
