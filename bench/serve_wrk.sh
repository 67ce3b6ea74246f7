#!/usr/bin/env bash
# rjq serve under wrk, against a trivial evhttp server, in one run, on
# loopback only:
#
#   1. rjq-evhttp-trivial (bench/evhttp_trivial.c): every POST answered at
#      once with a small fixed body; the listener set up as rjq serve's;
#   2. rjq serve, POST /v1/queues/bench/jobs?wait=WAIT_MS with a small body:
#      enqueue, a worker (rjq-gateway_worker) completes it with
#      "done:<payload>", the reply is the result;
#
# each with wrk -t THREADS at every count of CONNS connections, for DURATION
# seconds: requests/s, p50/p99 latency, status codes, socket errors, and the
# ratio rjq/trivial. Then BIG_REPS runs of BIG_CONNS connections against rjq
# serve, with its VmRSS (/proc/PID/status) before, at the peak and after
# each run, and its open descriptors.
#
#   bash bench/serve_wrk.sh [BUILD_DIR]          (default: the build/ beside bench/)
#   DURATION=5 CONNS="100 1000 5000" REPS=3 bash bench/serve_wrk.sh
#
# Everything is private and stopped by pid at exit: a redis-server on a free
# port (--save '' --appendonly no, a temp dir), the two servers and the
# worker. The binaries are copied into the temp dir first, so a rebuild
# during the run changes nothing. wrk is installed with apt-get if missing
# (as root).
#
# wrk needs a descriptor per connection, and so does the server: the script
# raises `ulimit -n` in its own shell (to NOFILE, else as far as the hard
# limit allows) before it starts anything, since rjq serve does not raise
# its own RLIMIT_NOFILE, and checks the servers' limits in /proc/PID/limits.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
B=$(cd "${1:-$here/../build}" && pwd)
DURATION=${DURATION:-10}          # seconds per wrk run
CONNS=${CONNS:-"100 1000"}        # connection counts of the comparison
REPS=${REPS:-1}                   # runs of each (target, conns); medians reported
THREADS=${THREADS:-2}             # wrk -t
WARMUP=${WARMUP:-2}               # seconds of wrk (100 connections) per server first, not reported
WAIT_MS=${WAIT_MS:-10000}         # ?wait=
WRK_TIMEOUT=${WRK_TIMEOUT:-15}    # wrk --timeout (s): longer than the wait
WORKER_CONC=${WORKER_CONC:-5000}  # rjq-gateway_worker -c
BODY=${BODY:-'{"i":1,"k":"v"}'}   # the request body (the job's payload)
QUEUE=${QUEUE:-bench}
BIG_CONNS=${BIG_CONNS:-5000}      # the RSS runs
BIG_REPS=${BIG_REPS:-3}
BIG_DURATION=${BIG_DURATION:-$DURATION}
NOFILE=${NOFILE:-65536}
KEEP=${KEEP:-0}                   # 1: keep the temp dir (logs, wrk output)

die() { echo "serve_wrk: $*" >&2; exit 1; }
note() { echo "serve_wrk: $*" >&2; }

for b in rjq rjq-gateway_worker rjq-evhttp-trivial; do
  [ -x "$B/$b" ] || die "$B/$b is missing (make build)"
done
"$B/rjq" help 2>&1 | grep -q '^  serve ' || die "$B/rjq has no serve command (built without jansson)"
command -v redis-server >/dev/null || die "redis-server is missing"
command -v python3 >/dev/null || die "python3 is missing"
if ! command -v wrk >/dev/null; then
  [ "$(id -u)" = 0 ] || die "wrk is missing: apt-get install wrk"
  note "installing wrk"
  apt-get install -y -qq wrk >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
fi

# ---- descriptors: this shell's limit is inherited by wrk and both servers
maxc=0
[ "$BIG_REPS" -gt 0 ] && maxc=$BIG_CONNS
for c in $CONNS; do [ "$c" -gt "$maxc" ] && maxc=$c; done
want=$((maxc + 512))
if ! ulimit -n "$NOFILE" 2>/dev/null; then
  hard=$(ulimit -Hn)
  [ "$hard" = unlimited ] && hard=$(cat /proc/sys/fs/nr_open)
  ulimit -n "$hard"
  note "ulimit -n $NOFILE refused (hard limit $(ulimit -Hn)); using $(ulimit -n)"
fi
nofile=$(ulimit -n)
[ "$nofile" = unlimited ] || [ "$nofile" -ge "$want" ] ||
  die "ulimit -n is $nofile, $maxc connections need >= $want (raise the hard limit)"

dir=$(mktemp -d /tmp/rjq-servewrk-XXXXXX)
mkdir "$dir/bin"
for b in rjq rjq-gateway_worker rjq-evhttp-trivial; do cp "$B/$b" "$dir/bin/"; done
bin=$dir/bin
trivial_pid="" serve_pid="" worker_pid="" sampler_pid=""
stopped_status=""
stop_pid() { # pid: SIGTERM, wait up to 10 s, then SIGKILL; its exit status in $stopped_status
  local p=$1
  stopped_status=""
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 0
  kill "$p" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$p" 2>/dev/null && { note "pid $p ignored SIGTERM: SIGKILL"; kill -9 "$p" 2>/dev/null || true; }
  stopped_status=0
  wait "$p" 2>/dev/null || stopped_status=$?
}
cleanup() {
  stop_pid "$sampler_pid"
  stop_pid "$worker_pid"
  stop_pid "$serve_pid"
  stop_pid "$trivial_pid"
  [ -f "$dir/redis.pid" ] && stop_pid "$(cat "$dir/redis.pid")"
  if [ "$KEEP" = 1 ]; then note "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# the port a server printed as "listening on ADDR:PORT" into $1 (pid $2)
wait_listening() {
  local out=$1 pid=$2
  for _ in $(seq 100); do
    if grep -q '^listening on ' "$out" 2>/dev/null; then sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$out" | head -1; return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}
vmrss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
vmhwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
nfds() { local f=(/proc/"$1"/fd/*); echo "${#f[@]}"; }
nofile_of() { awk '/^Max open files/ {print $4}' "/proc/$1/limits"; }
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
listen_drops() { awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) n[$i] = i; h = 1 } else print $n["ListenOverflows"] + 0, $n["ListenDrops"] + 0 }' /proc/net/netstat; }
alive() { kill -0 "$1" 2>/dev/null; }
# the machine's busy and idle ticks (all CPUs; busy: user nice system irq softirq steal)
machine_ticks() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit}' /proc/stat; }
serve_info() { # "waiting requests" from GET /v1/server
  python3 - "$sport" <<'EOF'
import json, sys, urllib.request
try:
    d = json.load(urllib.request.urlopen("http://127.0.0.1:%s/v1/server" % sys.argv[1], timeout=5))
    print(d.get("waiting"), d.get("requests"))
except Exception as e:
    print("? ?")
EOF
}
TCK=$(getconf CLK_TCK)

# ---- Redis, the servers, the worker
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir" >/dev/null
for _ in $(seq 50); do [ -s "$dir/redis.pid" ] && redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$rport" ping >/dev/null 2>&1 || die "redis-server did not start (see $dir/redis.log)"
redis_pid=$(cat "$dir/redis.pid")
url="redis://127.0.0.1:$rport"

"$bin/rjq-evhttp-trivial" 127.0.0.1:0 >"$dir/trivial.out" 2>"$dir/trivial.err" &
trivial_pid=$!
tport=$(wait_listening "$dir/trivial.out" "$trivial_pid") || die "rjq-evhttp-trivial did not start: $(cat "$dir/trivial.err")"

"$bin/rjq-gateway_worker" -r "$url" -c "$WORKER_CONC" "$QUEUE" >"$dir/worker.out" 2>"$dir/worker.err" &
worker_pid=$!
"$bin/rjq" -u "$url" serve --listen 127.0.0.1:0 >"$dir/serve.out" 2>"$dir/serve.err" &
serve_pid=$!
sport=$(wait_listening "$dir/serve.out" "$serve_pid") || die "rjq serve did not start: $(cat "$dir/serve.err")"

for p in "$trivial_pid" "$serve_pid"; do
  n=$(nofile_of "$p")
  [ "$n" = unlimited ] || [ "$n" -ge "$want" ] || die "pid $p may open $n files, fewer than $want"
done

path="/v1/queues/$QUEUE/jobs?wait=$WAIT_MS"
turl="http://127.0.0.1:$tport$path"
surl="http://127.0.0.1:$sport$path"
# one awaited job through rjq serve, and one POST to the trivial server
python3 - "$surl" "$turl" "$BODY" <<'EOF' || die "a first request failed"
import sys, urllib.request
for url, want in ((sys.argv[1], b"done:" + sys.argv[3].encode()), (sys.argv[2], b"done:trivial")):
    r = urllib.request.urlopen(urllib.request.Request(url, data=sys.argv[3].encode(), method="POST"), timeout=15)
    got = r.read()
    if r.status != 200 or got != want:
        sys.exit("%s: %s %r" % (url, r.status, got))
EOF

# ---- wrk: POST BODY; status codes and wrong bodies counted per thread; one RESULT line
cat >"$dir/post.lua" <<'EOF'
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY") or "x"
wrk.headers["Content-Type"] = "application/octet-stream"
local expect = os.getenv("WRK_EXPECT")
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) codes = {}; wrong = 0 end
function response(status, headers, body)
  codes[status] = (codes[status] or 0) + 1
  if status == 200 and expect and body ~= expect then wrong = wrong + 1 end
end
function done(summary, latency, requests)
  local all, bad, names = {}, 0, {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("codes")) do all[k] = (all[k] or 0) + v end
    bad = bad + t:get("wrong")
  end
  local non2xx = 0
  for k, v in pairs(all) do
    table.insert(names, k)
    if k < 200 or k > 299 then non2xx = non2xx + v end
  end
  table.sort(names)
  local cs = {}
  for _, k in ipairs(names) do table.insert(cs, k .. ":" .. all[k]) end
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_s=%.3f rps=%.1f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f " ..
    "non2xx=%d s202=%d wrong_body=%d connect=%d read=%d write=%d timeout=%d codes=%s\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    non2xx, all[202] or 0, bad, e.connect, e.read, e.write, e.timeout,
    #cs > 0 and table.concat(cs, ",") or "-"))
end
EOF

results=$dir/results
: >"$results"
# run_wrk LABEL PROC CONNS SECONDS URL SERVER_PID EXPECT: appends one line to $results
# (PROC: trivial or serve, the server's log name)
run=0
run_wrk() {
  local label=$1 proc=$2 c=$3 d=$4 u=$5 pid=$6 expect=$7 out
  run=$((run + 1)); out=$dir/wrk-$run-$label-$c.txt
  local s0 r0 w0 lo0 ld0 s1 r1 w1 lo1 ld1 rc=0 tu ts mb0 mi0 mb1 mi1
  s0=$(cpu_ticks "$pid"); r0=$(cpu_ticks "$redis_pid"); w0=$(cpu_ticks "$worker_pid")
  read -r mb0 mi0 < <(machine_ticks)
  read -r lo0 ld0 < <(listen_drops)
  TIMEFORMAT='%U %S'
  { time WRK_BODY=$BODY WRK_EXPECT=$expect wrk -t"$THREADS" -c"$c" -d"${d}s" --timeout "${WRK_TIMEOUT}s" \
      -s "$dir/post.lua" "$u" >"$out" 2>&1 || rc=$?; } 2>"$out.time"
  read -r tu ts <"$out.time"
  alive "$pid" || { cat "$out" >&2; die "the $proc server (pid $pid) died during the run; its stderr: $(tail -20 "$dir/$proc.err" 2>/dev/null)"; }
  s1=$(cpu_ticks "$pid"); r1=$(cpu_ticks "$redis_pid"); w1=$(cpu_ticks "$worker_pid")
  read -r mb1 mi1 < <(machine_ticks)
  read -r lo1 ld1 < <(listen_drops)
  local res
  res=$(grep '^RESULT ' "$out" | tail -1 | cut -d' ' -f2-) || true
  if [ -z "$res" ] || [ "$rc" != 0 ]; then
    note "wrk ($label, $c connections) exited $rc:"; cat "$out" >&2
    [ -n "$res" ] || res="requests=0 rps=0 failed=1"
  fi
  # CPU seconds over the run: the server, Redis, the worker, wrk, the whole
  # machine busy and idle (others = machine busy - ours: other processes,
  # and interrupt time not charged to ours)
  echo "label=$label conns=$c $res srv_cpu_s=$(( s1 - s0 ))/$TCK redis_cpu_s=$(( r1 - r0 ))/$TCK worker_cpu_s=$(( w1 - w0 ))/$TCK wrk_cpu_s=$tu+$ts machine_busy_s=$(( mb1 - mb0 ))/$TCK machine_idle_s=$(( mi1 - mi0 ))/$TCK listen_overflows=$((lo1 - lo0)) listen_drops=$((ld1 - ld0))" >>"$results"
  tail -1 "$results" >&2
}

echo "# serve_wrk: $(date -u '+%Y-%m-%d %H:%M UTC'), nproc=$(nproc), $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2), $(redis-server --version | cut -d' ' -f1-3)"
echo "# wrk -t$THREADS, ${DURATION}s per run (big runs ${BIG_DURATION}s), --timeout ${WRK_TIMEOUT}s, body '$BODY' (${#BODY} B), ?wait=$WAIT_MS, worker -c $WORKER_CONC, reps $REPS"
echo "# ulimit -n $nofile (servers: $(nofile_of "$trivial_pid"), $(nofile_of "$serve_pid")), somaxconn $(cat /proc/sys/net/core/somaxconn), tcp_max_syn_backlog $(cat /proc/sys/net/ipv4/tcp_max_syn_backlog)"
echo "# redis 127.0.0.1:$rport (pid $redis_pid), trivial :$tport (pid $trivial_pid), rjq serve :$sport (pid $serve_pid), worker pid $worker_pid"
rss_start=$(vmrss_kb "$serve_pid")

if [ "$WARMUP" -gt 0 ]; then
  WRK_BODY=$BODY wrk -t"$THREADS" -c100 -d"${WARMUP}s" -s "$dir/post.lua" "$turl" >/dev/null 2>&1 || true
  WRK_BODY=$BODY wrk -t"$THREADS" -c100 -d"${WARMUP}s" -s "$dir/post.lua" "$surl" >/dev/null 2>&1 || true
fi
rss_warm=$(vmrss_kb "$serve_pid")
for c in $CONNS; do
  for _ in $(seq "$REPS"); do # interleaved
    run_wrk trivial trivial "$c" "$DURATION" "$turl" "$trivial_pid" "done:trivial"
    sleep 1
    run_wrk serve serve "$c" "$DURATION" "$surl" "$serve_pid" "done:$BODY"
    sleep 1
  done
done

# ---- RSS of rjq serve over BIG_REPS runs of BIG_CONNS connections
rss=$dir/rss
: >"$rss"
settle() { # until no request waits in rjq serve (at most 20 s), then 1 s more
  for _ in $(seq 40); do
    read -r w _ < <(serve_info)
    [ "$w" = 0 ] && break
    sleep 0.5
  done
  sleep 1
}
settle
rss_table=$(vmrss_kb "$serve_pid")
for i in $(seq "$BIG_REPS"); do
  before=$(vmrss_kb "$serve_pid"); fd0=$(nfds "$serve_pid")
  ( while :; do echo "$(vmrss_kb "$serve_pid") $(nfds "$serve_pid")"; sleep 0.5; done ) >"$dir/samples-$i" 2>/dev/null &
  sampler_pid=$!
  run_wrk big serve "$BIG_CONNS" "$BIG_DURATION" "$surl" "$serve_pid" "done:$BODY"
  stop_pid "$sampler_pid"; sampler_pid=""
  right_after=$(vmrss_kb "$serve_pid")
  settle
  after=$(vmrss_kb "$serve_pid"); fd1=$(nfds "$serve_pid")
  read -r waiting reqs < <(serve_info)
  peak=$(awk 'BEGIN {m = 0} $1 > m {m = $1} END {print m}' "$dir/samples-$i")
  peakfd=$(awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}' "$dir/samples-$i")
  echo "run=$i before_kb=$before peak_kb=$peak right_after_kb=$right_after after_kb=$after fds_before=$fd0 fds_peak=$peakfd fds_after=$fd1 waiting_after=$waiting requests_total=$reqs redis_used_memory=$(redis-cli -p "$rport" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')" >>"$rss"
  tail -1 "$rss" >&2
  [ "$peakfd" -ge "$BIG_CONNS" ] || note "run $i: rjq serve held at most $peakfd descriptors: not all $BIG_CONNS connections were accepted at once"
done
hwm=$(vmhwm_kb "$serve_pid")

# ---- report
python3 - "$results" "$rss" "$rss_start" "$rss_warm" "$rss_table" "$hwm" <<'EOF'
import statistics as st, sys
def parse(line):
    d = {}
    for kv in line.split():
        k, _, v = kv.partition("=")
        d[k] = v
    return d
rows = [parse(l) for l in open(sys.argv[1]) if l.strip()]
def num(d, k):
    v = d.get(k, "nan")
    try:
        if "/" in v: a, b = v.split("/"); return float(a) / float(b)
        if "+" in v: a, b = v.split("+"); return float(a) + float(b)
        return float(v)
    except ValueError: return float("nan")
for r in rows: # CPU: % of one core over the run, and µs per request
    ours = sum(num(r, p + "_cpu_s") for p in ("srv", "redis", "worker", "wrk"))
    r["others_cpu_s"] = str(max(0.0, num(r, "machine_busy_s") - ours))
    r["machine_idle_cpu_s"] = r.get("machine_idle_s", "nan")
    for p in ("srv", "redis", "worker", "wrk", "others", "machine_idle"):
        cpu = num(r, p + "_cpu_s")
        r[p + "_pct"] = str(100 * cpu / num(r, "duration_s"))
        r[p + "_us"] = str(1e6 * cpu / num(r, "requests")) if num(r, "requests") else "nan"
def med(rs, k): return st.median([num(r, k) for r in rs]) if rs else float("nan")
def tot(rs, k): return int(sum(num(r, k) for r in rs if d_ok(r, k)))
def d_ok(r, k): return k in r and r[k] not in ("", "nan")
def errs(rs):
    n = lambda k: tot(rs, k)
    s = "%d non-2xx" % n("non2xx")
    if n("s202"): s += " (%d x 202)" % n("s202")
    sock = [(k, n(k)) for k in ("connect", "read", "write", "timeout") if n(k)]
    s += ", " + (", ".join("%s %d" % kv for kv in sock) if sock else "0 socket")
    if n("wrong_body"): s += ", %d wrong bodies" % n("wrong_body")
    if n("listen_overflows"): s += ", %d listen overflows" % n("listen_overflows")
    return s
big = [r for r in rows if r["label"] == "big"]
main = [r for r in rows if r["label"] != "big"]
conns = []
for r in main:
    if r["conns"] not in conns: conns.append(r["conns"])
print()
reps = max(len([r for r in main if r["conns"] == c and r["label"] == "serve"]) for c in conns) if conns else 0
if reps > 1:
    print("(medians of %d interleaved runs; errors summed over them)" % reps)
print("| conns | trivial req/s | rjq req/s | rjq / trivial | trivial p50 / p99 ms | rjq p50 / p99 ms | trivial errors | rjq errors |")
print("|---:|---:|---:|---:|---|---|---|---|")
for c in conns:
    t = [r for r in main if r["conns"] == c and r["label"] == "trivial"]
    s = [r for r in main if r["conns"] == c and r["label"] == "serve"]
    tr, sr = med(t, "rps"), med(s, "rps")
    print("| %s | %s | %s | %.3f | %.2f / %.2f | %.2f / %.2f | %s | %s |" % (
        c, f"{tr:,.0f}", f"{sr:,.0f}", sr / tr if tr else float("nan"),
        med(t, "p50_ms"), med(t, "p99_ms"), med(s, "p50_ms"), med(s, "p99_ms"), errs(t), errs(s)))
print()
print("CPU over the runs, %% of one core (of %d) and µs per request (medians):" % __import__("os").cpu_count())
print()
print("| conns | trivial server | wrk (trivial) | others, idle (trivial) | rjq serve | redis | worker | wrk (rjq) | others, idle (rjq) |")
print("|---:|---|---|---|---|---|---|---|---|")
def cpu(rs, p): return "%.0f%%, %.1f µs" % (med(rs, p + "_pct"), med(rs, p + "_us"))
def rest(rs): return "%.0f%%, %.0f%%" % (med(rs, "others_pct"), med(rs, "machine_idle_pct"))
for c in conns:
    t = [r for r in main if r["conns"] == c and r["label"] == "trivial"]
    s = [r for r in main if r["conns"] == c and r["label"] == "serve"]
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (c, cpu(t, "srv"), cpu(t, "wrk"), rest(t),
          cpu(s, "srv"), cpu(s, "redis"), cpu(s, "worker"), cpu(s, "wrk"), rest(s)))
print()
print("(all in %% of one core, the machine has %d; others: busy time not charged to these processes, i.e. other processes and interrupt time; idle: the whole machine's)" % __import__("os").cpu_count())
if big:
    rss = [parse(l) for l in open(sys.argv[2]) if l.strip()]
    print()
    print("rjq serve VmRSS: %s KiB at start, %s KiB after the warm-up, %s KiB after the runs above; VmHWM %s KiB at the end" % tuple(f"{int(x):,}" for x in sys.argv[3:7]))
    print()
    print("| run (%s conns) | req/s | p50 / p99 ms | errors | rjq serve CPU | others, idle | RSS before KiB | peak | right after | settled | fds peak / after | waiting after |" % big[0]["conns"])
    print("|---:|---:|---|---|---|---|---:|---:|---:|---:|---|---:|")
    for r, m in zip(big, rss):
        print("| %s | %s | %.2f / %.2f | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |" % (
            m["run"], f"{num(r, 'rps'):,.0f}", num(r, "p50_ms"), num(r, "p99_ms"), errs([r]), cpu([r], "srv"), rest([r]),
            f"{int(m['before_kb']):,}", f"{int(m['peak_kb']):,}", f"{int(m['right_after_kb']):,}",
            f"{int(m['after_kb']):,}", m["fds_peak"], m["fds_after"], m["waiting_after"]))
EOF

# ---- what the processes said
for f in serve trivial worker; do
  if [ -s "$dir/$f.err" ]; then echo; echo "# $f stderr (last 20 lines of $(wc -l <"$dir/$f.err")):"; tail -20 "$dir/$f.err"; fi
done
for p in "$serve_pid" "$trivial_pid" "$worker_pid" "$redis_pid"; do alive "$p" || die "pid $p is gone"; done
stop_pid "$serve_pid"; serve_pid=""
echo
echo "# rjq serve: exit status $stopped_status after SIGTERM"
[ "$stopped_status" = 0 ] || die "rjq serve exited $stopped_status"
