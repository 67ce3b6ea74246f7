#!/bin/bash
# bench/stages.sh: where an awaited job's time goes, stage by stage
# (bench/README.md "The 16 KiB awaited job's tail"). Starts a private
# redis-server, traces it (`strace -f -ttt -p`) and `rjq-bench awaited-seq`
# (`strace -ff -ttt`: the producer and its worker process) at once,
# merges the three traces on one clock and prints, per stage of an
# awaited job (the producer's write of the enqueue, Redis' read of it, its
# write of the push, the worker's read, its completion's write, Redis'
# read of it, its write of the outcome, the producer's read), the time
# since the previous stage: p50 / p90 / p99 / max over the jobs (the
# WARM jobs and the first 10 left out). Under strace every system call
# costs tens of µs: compare stages and sizes of one run, not absolute times.
#
# Usage: bench/stages.sh [BYTES]     (default 16384)
# Environment: RJQ_BENCH (build/rjq-bench), N (300), PORT (17480), OUT (mktemp)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
RJQ_BENCH=${RJQ_BENCH:-$root/build/rjq-bench}
BYTES=${1:-16384}
N=${N:-300}
PORT=${PORT:-17480}
OUT=${OUT:-$(mktemp -d /tmp/rjq-stages.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$RJQ_BENCH" ] || { echo "stages.sh: no $RJQ_BENCH (make build)" >&2; exit 1; }

redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$OUT/redis.pid" --logfile "$OUT/redis.log" --dir "$OUT"
rpid=
for _ in $(seq 100); do redis-cli -p "$PORT" ping > /dev/null 2>&1 && break; sleep 0.1; done
rpid=$(cat "$OUT/redis.pid")
strace -f -ttt -o "$OUT/redis.tr" -p "$rpid" 2> /dev/null &
spid=$!
stop() {
  kill -INT "$spid" 2> /dev/null || true
  wait "$spid" 2> /dev/null || true
  kill "$rpid" 2> /dev/null || true
}
trap stop EXIT
sleep 0.5
REDIS_PORT=$PORT N=$N PAYLOAD_BYTES=$BYTES strace -ff -ttt -o "$OUT/c" "$RJQ_BENCH" awaited-seq > "$OUT/seq.json" 2> /dev/null
sleep 0.3
kill -INT "$spid" 2> /dev/null || true
wait "$spid" 2> /dev/null || true
# the producer is the first process, its forked worker the second
mapfile -t procs < <(ls "$OUT"/c.* | sort -t. -k2 -n)
{ sed 's/^/P /' "${procs[0]}"; sed 's/^/W /' "${procs[-1]}"; sed 's/^[0-9]* */R /' "$OUT/redis.tr"; } |
  awk '{ t = $2; $2 = ""; print t, $0 }' | sort -n | grep -v 'futex\|clock_gettime' > "$OUT/merged"
echo "awaited-seq, $BYTES bytes, N=$N: $(tail -1 "$OUT/seq.json" | grep -o '"p50_ms[^}]*"p99_ms":[0-9.]*')"
/usr/bin/python3 - "$OUT/merged" << 'PY'
import re, sys
ev = []
for l in open(sys.argv[1]):
    m = re.match(r'(\S+) (\w)  (\w+)\((\d+), (.*)= (-?\d+)\s*$', l)
    if m: ev.append((float(m[1]), m[2], m[3], int(m[4]), m[5], int(m[6])))
def enq(e): return e[1] == 'P' and e[2] == 'write' and 'FCALL' in e[4]
def out(e): return e[2] in ('write', 'writev') and 'message' in e[4]
seq = [('the producer writes the enqueue', None),
       ('redis reads it', lambda e, s: e[1] == 'R' and e[2] == 'read' and e[5] == s['enq']),
       ('redis writes the push to the worker (the enqueue script)', lambda e, s: e[1] == 'R' and out(e) and 'rjq:{' in e[4]),
       ('the worker reads the push', lambda e, s: e[1] == 'W' and e[2] == 'read' and e[5] > 0 and e[3] == s.setdefault('wsub', e[3])),
       ('the worker writes the completion (the handler)', lambda e, s: e[1] == 'W' and e[2] == 'write' and 'FCALL' in e[4]),
       ('redis reads it', lambda e, s: e[1] == 'R' and e[2] == 'read' and e[5] == s['comp']),
       ('redis writes the outcome (the complete script)', lambda e, s: e[1] == 'R' and out(e) and 'rjq:reply:' in e[4]),
       ('the producer reads the outcome', lambda e, s: e[1] == 'P' and e[2] == 'read' and e[5] > 0 and e[3] != s['pcmd'])]
jobs, i = [], 0
while i < len(ev):
    if not enq(ev[i]):
        i += 1
        continue
    s = {'enq': ev[i][5], 'pcmd': ev[i][3]}
    ts, k, j = [ev[i][0]], 1, i + 1
    while j < len(ev) and k < len(seq) and not enq(ev[j]):
        if seq[k][1](ev[j], s):
            ts.append(ev[j][0])
            if k == 4: s['comp'] = ev[j][5]
            k += 1
        j += 1
    if len(ts) == len(seq): jobs.append(ts)
    i = j
jobs = jobs[10:]
if not jobs: sys.exit("stages.sh: no whole job found in the traces")
def pc(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))]
print("jobs: %d\n\n| stage (µs since the previous) | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|" % len(jobs))
for k in range(1, len(seq)):
    d = [(t[k] - t[k - 1]) * 1e6 for t in jobs]
    print("| %s | %.0f | %.0f | %.0f | %.0f |" % (seq[k][0], pc(d, 50), pc(d, 90), pc(d, 99), max(d)))
d = [(t[-1] - t[0]) * 1e6 for t in jobs]
print("| whole: the enqueue's write to the outcome's read | %.0f | %.0f | %.0f | %.0f |" % (pc(d, 50), pc(d, 90), pc(d, 99), max(d)))
PY
