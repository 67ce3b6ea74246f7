#!/bin/bash
# bench/deps_replay.sh: the Redis instructions of each script call of
# deps-bench's run, one call at a time (bench/README.md, the depoq
# section). The FCALLs of one `deps-bench MODE N` on an uninstrumented
# redis-server are captured with MONITOR; then, on a redis-server under
# callgrind (counting inside FCALL only) holding what
# `DEPS_BENCH_ENQUEUE_ONLY=1 deps-bench MODE N` leaves (the same ids and
# keys), the run's calls (from its first claim) are sent one at a time in
# their order, a dump after each: no client's periodic calls are counted
# and the batching is the captured run's, so two builds compare call for
# call (give each its own capture, or REUSE=DIR to replay another build's
# calls: the library's name is rewritten).
#
# Usage: bench/deps_replay.sh DEPS_BENCH [MODE [N]]   (MODE dep, N 2000)
# Environment: PORT (17490, and PORT+1 for callgrind), OUT (mktemp),
#   REUSE (a previous OUT whose capture is replayed), FROM=deps_add: the
#   calls replayed from the first deps_add on (the dependents' enqueue,
#   then the run), on what `DEPS_BENCH_ENQUEUE_ONLY=1 deps-bench plain N`
#   leaves (the children alone, the same ids: modes dep and same)
# Prints per call "index function first-key instructions", then the sums
# per function and queue, and the whole run.
set -euo pipefail
BIN=$1
MODE=${2:-dep}
N=${3:-2000}
PORT=${PORT:-17490}
OUT=${OUT:-$(mktemp -d /tmp/rjq-deps-replay.XXXXXX)}
PY=/usr/bin/python3
FROM=${FROM:-claim}
setup_mode=$MODE
[ "$FROM" = claim ] || setup_mode=plain
mkdir -p "$OUT/calls"
# shellcheck source=bench/cg_redis.sh
. "$(dirname "$0")/cg_redis.sh"
libname() { redis-cli -p "$1" FUNCTION LIST | grep -o 'rjq_[0-9a-f]\{12\}' | head -1; }

if [ -z "${REUSE:-}" ]; then
  redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" > "$OUT/capture.log" 2>&1 &
  rp=$!
  until redis-cli -p "$PORT" ping > /dev/null 2>&1; do sleep 0.1; done
  REDIS_URL="redis://127.0.0.1:$PORT" "$BIN" plain 10 > /dev/null
  redis-cli -p "$PORT" FLUSHALL > /dev/null
  redis-cli -p "$PORT" MONITOR > "$OUT/monitor.txt" &
  mp=$!
  sleep 0.5
  REDIS_URL="redis://127.0.0.1:$PORT" "$BIN" "$MODE" "$N"
  sleep 0.5
  kill "$mp" 2> /dev/null || true
  kill "$rp"; wait "$rp" 2> /dev/null || true
  src=$OUT/monitor.txt
else
  src=$REUSE/monitor.txt
fi

# one RESP file per FCALL from the first FROM call on, and their list
"$PY" - "$src" "$OUT/calls" "$FROM" << 'PYEOF'
import sys, re
from cg_resp import enc
src, out, first = sys.argv[1], sys.argv[2], sys.argv[3]
def unesc(t):
    b = bytearray(); i = 0
    while i < len(t):
        c = t[i]
        if c == '\\':
            n = t[i + 1]
            if n == 'x': b.append(int(t[i + 2:i + 4], 16)); i += 4; continue
            b += {'n': b'\n', 'r': b'\r', 't': b'\t', 'a': b'\a', 'b': b'\b', '"': b'"', '\\': b'\\'}[n]; i += 2; continue
        b += c.encode(); i += 1
    return bytes(b)
k, run = 0, False
names = open(out + '/names', 'w')
for line in open(src, errors='surrogateescape'):
    if '"FCALL" "' not in line: continue
    w = [unesc(x) for x in re.findall(r'"((?:[^"\\]|\\.)*)"', line.split('] ', 1)[1])]
    fn = w[1].decode().split('_', 2)[2]
    run = run or fn == first
    if not run: continue
    open('%s/%04d.resp' % (out, k), 'wb').write(enc(*w))
    names.write('%04d %s %s %s\n' % (k, fn, w[3].decode(), w[1].decode()[:16]))
    k += 1
PYEOF

CG_PORT=$((PORT + 1))
cg_redis_start "$CG_PORT" deps_replay.sh --toggle-collect=fcallCommand
REDIS_URL="redis://127.0.0.1:$CG_PORT" "$BIN" plain 10 > /dev/null
lib=$(libname "$CG_PORT")
redis-cli -p "$CG_PORT" FLUSHALL > /dev/null
DEPS_BENCH_ENQUEUE_ONLY=1 REDIS_URL="redis://127.0.0.1:$CG_PORT" "$BIN" "$setup_mode" "$N" > /dev/null
callgrind_control -z "$CG_REDIS_PID" > /dev/null 2>&1
while read -r i fn key old; do
  sed "s/$old/$lib/" "$OUT/calls/$i.resp" | redis-cli -p "$CG_PORT" --pipe > "$OUT/pipe.log" 2>&1
  grep -q 'errors: 0' "$OUT/pipe.log" || echo "deps_replay.sh: call $i ($fn) failed" >&2
  callgrind_control -d "c$i" "$CG_REDIS_PID" > /dev/null 2>&1
  echo "$i $fn $key $(cg_dumped "c$i")"
done < "$OUT/calls/names" | tee "$OUT/percall.txt"
awk '{ k = $2 " " $3; s[k] += $4; n[k]++; t += $4 }
     END { for (k in s) printf "%-40s %4d calls %12d Ir\n", k, n[k], s[k]; printf "whole run %d Ir\n", t }' \
  "$OUT/percall.txt" | sort
echo "(output in $OUT)"
