#!/usr/bin/env bash
# What a Redis Cluster costs rjq (issue 34; results in bench/README.md, "Redis Cluster").
#
# Starts one standalone redis-server and a cluster of 3 masters (no replicas:
# the same work per job as the standalone server; replicas would add their
# replication on both sides alike), each on a free loopback port in a scratch
# directory, and runs build/rjq-cluster-bench on each:
#   drain    N jobs over 30 queues, enqueued in batches then drained (Redis CPU per job)
#   awaited  N awaited jobs over 30 queues, WINDOW in flight (Redis CPU per job)
#   idle     1000 idle queues with a worker each: commands per second
#   sharded  (issue 35) the drain of ONE queue (QUEUES=1, N_DRAIN jobs) on the cluster,
#            unsharded ("cluster-1q") then declared with SHARDS (3) shards
#            ("cluster-sharded", one per master): Redis CPU per job summed over the
#            masters and each master's share (not in the default CASES); the worker's
#            concurrency is CONC (8) on both, SHARDED_CONC on the sharded one
#   place    (issue 35) anonymous jobs' shard: POLICY=rr (the library's round robin)
#            and POLICY=least (fewest enqueues awaiting their reply) on one 3-shard
#            queue, N_PLACE (30000) jobs, PLACE_WINDOW (500) enqueues in flight,
#            workers running; evenly, then with one master slowed (SLOW_PAUSE_MS
#            (20) of every 2x that paused with CLIENT PAUSE): throughput and the
#            spread of the shards' depths (not in the default CASES)
#   paced    (issues 34, 35: the floor) awaited jobs at a FIXED offered load, RATE (600) a
#            second for PACED_SECS (15) s (WINDOW 2000: never the limit), 30 queues:
#            "standalone" at RATE, "standalone-third" at RATE/3 (the load each of 3 masters
#            sees) and "cluster" at RATE; with STRACE=1 each master's epoll_wait returns
#            (wake-ups) and system calls per job, with VALGRIND=1 (use RATE=60) Redis'
#            instructions per job, always the kernel's share (used_cpu_sys) and each master's
#            voluntary context switches (a wake-up after a wait) per job
#   paced-sharded  the same for ONE queue: "cluster-1q" at RATE and RATE/3 (unsharded: one
#            master does it all), "cluster-sharded" (SHARDS, 3) at RATE
#   flow-sharded  (issue 35: the drain's ratio against the load) ONE queue's plain jobs
#            enqueued in batches at a fixed offered load and completed by a worker (the
#            bench's "flow": the drain spread over time), for each rate R of RATES
#            ("300 1000 3000 10000 0"; 0: unpaced, as fast as the worker takes them) for
#            FLOW_SECS (10) s (N_FLOW, 30000 jobs, unpaced): "cluster-1q@R" (unsharded),
#            "cluster-1q-third@R" (unsharded at one master's share of R) and "cluster-sharded@R"
#            (SHARDS, 3); CPU also from /proc/PID/stat (utime + stime) per master
# The cluster's drain also gives the work spread (each master's share of the
# commands). One JSON line per case and server on stdout; the ratios at the end.
#
#   bash bench/cluster.sh            (BUILD=build, N_DRAIN=60000, N_AWAIT=20000,
#                                     IDLE_SECS=30; what it started is stopped by pid at
#                                     its end, Ctrl-C and SIGTERM included)
#
#   CASES="drain awaited idle"   the cases to run (the EVEN=1 drain runs with drain)
#   BENCHES="before=/path/rjq-cluster-bench after=build/rjq-cluster-bench"
#                                A/B: each case runs with each bench in turn (interleaved),
#                                REPS (1) times; the lines carry "bench"
#   CALLS=1                      tap MONITOR on every node during each run and print the
#                                script calls per job by function (enqueue, complete, claim
#                                ...): jobs per enqueue call and per complete call, and the
#                                other commands per job by name (HMGET, PUBLISH ...). MONITOR
#                                costs Redis CPU: the CPU figures of such runs are not valid.
#   VALGRIND=1                   every redis-server under callgrind; each run prints Redis'
#                                instructions per job (summed over the masters) of its
#                                measured phase (the bench zeroes and dumps the counters:
#                                CG_HOOK); a figure that does not move with the machine's
#                                load. Use small N (N_AWAIT=2000): Redis runs ~50x slower.
#                                Instructions are user space only (no kernel time).
#   STRACE=1                     strace -c -f attached to every redis-server for the measured
#                                phase (the same hook); prints system calls per job summed over
#                                the masters, by call. strace slows Redis: its CPU figures are
#                                not valid. Not with VALGRIND=1 (valgrind's own calls).
#   WINDOW=200                   awaited jobs in flight (WINDOW=1: one at a time, so no
#                                batching on either side: routing's own cost per job)
#   NODE_TIMEOUT=5000            cluster-node-timeout (ms); raise it with VALGRIND=1, where a
#                                node busy with a long script misses the bus' pings, is marked
#                                failed and the cluster answers CLUSTERDOWN (the run then
#                                measures retries)
#   EVEN_RUN=0                   skip the drain's EVEN=1 run (the spread)
#   KEEP=DIR                     copy the callgrind dumps and strace tables there at the end
set -euo pipefail
BUILD=${BUILD:-build}
BENCH=$BUILD/rjq-cluster-bench
[ -x "$BENCH" ] || { echo "build $BENCH first (make build)" >&2; exit 1; }
N_DRAIN=${N_DRAIN:-60000}
N_AWAIT=${N_AWAIT:-20000}
IDLE_SECS=${IDLE_SECS:-30}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rjq-cluster-bench.XXXXXX")
PIDS=()
# descendants PID: the pids of every process under PID (from /proc), but this
# listing's own subshell
descendants() {
    local f k kids
    for f in /proc/"$1"/task/*/children; do
        kids=()
        read -r -a kids <"$f" 2>/dev/null || true
        for k in "${kids[@]}"; do
            [ "$k" = "$BASHPID" ] && continue
            echo "$k"
            descendants "$k"
        done
    done
}
# At the end, however it comes (an error, Ctrl-C, SIGTERM: the traps below
# exit): whatever still runs under this script (a bench and its sed and tee,
# MONITOR taps, the slow-master loop), the strace runs the bench's hook
# started (not our children), then the servers; each by its pid.
cleanup() {
    trap - INT TERM HUP
    local p f rest
    rest=$(descendants $$)
    for p in $rest; do kill "$p" 2>/dev/null || true; done
    for f in "$DIR"/st.*.pid; do
        [ -e "$f" ] && kill -INT "$(cat "$f")" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

free_port() {
    local p
    while :; do
        # (both below the ephemeral range: a bus port there may be a client socket's)
        p=$((20000 + RANDOM % 12000))
        [ $((p + 10000)) -lt 32768 ] || continue
        # the port and its cluster bus port (+10000) both free
        if ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null &&
            ! (exec 3<>/dev/tcp/127.0.0.1/$((p + 10000))) 2>/dev/null; then
            echo "$p"
            return
        fi
    done
}

start_node() { # start_node PORT [cluster]
    local port=$1 d=$DIR/$1
    mkdir -p "$d"
    local extra=()
    [ "${2:-}" = cluster ] && extra=(--cluster-enabled yes --cluster-config-file nodes.conf
        --cluster-node-timeout "${NODE_TIMEOUT:-5000}")
    local vg=()
    [ "${VALGRIND:-0}" = 1 ] && vg=(valgrind --tool=callgrind --callgrind-out-file="$d/cg.out.%p")
    "${vg[@]}" redis-server --port "$port" --bind 127.0.0.1 --dir "$d" --save '' --appendonly no \
        --daemonize no --logfile "$d/log" "${extra[@]}" 2>"$d/valgrind.log" &
    PIDS+=($!)
    NODE_PID[$port]=$!
    for _ in $(seq 2000); do
        redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return
        sleep 0.05
    done
    echo "redis-server on $port did not start" >&2
    cat "$d/log" >&2
    exit 1
}

declare -A NODE_PID
SA=$(free_port)
start_node "$SA"
PORTS=()
for _ in 1 2 3; do
    p=$(free_port)
    while [[ " ${PORTS[*]} $SA " == *" $p "* ]]; do p=$(free_port); done
    PORTS+=("$p")
    start_node "$p" cluster
done
redis-cli --cluster create "${PORTS[@]/#/127.0.0.1:}" --cluster-yes >"$DIR/create.log" 2>&1
for _ in $(seq 400); do
    ok=0
    for p in "${PORTS[@]}"; do
        redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' && ok=$((ok + 1))
    done
    [ $ok -eq 3 ] && break
    sleep 0.05
done
[ $ok -eq 3 ] || { echo "the cluster did not come up" >&2; cat "$DIR/create.log" >&2; exit 1; }

STANDALONE=redis://127.0.0.1:$SA
CLUSTER=redis://127.0.0.1:${PORTS[0]}
echo "# $(date -u '+%F %H:%M UTC'), redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores"
CASES=${CASES:-drain awaited idle}
BENCHES=${BENCHES:-cur=$BENCH}
REPS=${REPS:-1}
CALLS=${CALLS:-0}
RUN=0
# monitor_start PORT...: a MONITOR tap per node (pids in MON_PIDS, files in MON_FILES)
monitor_start() {
    MON_PIDS=() MON_FILES=()
    local p f
    for p in "$@"; do
        f=$DIR/mon.$RUN.$p
        redis-cli -p "$p" monitor >"$f" &
        MON_PIDS+=($!) MON_FILES+=("$f")
        # (the tap is on once it shows a command)
        until grep -q rjq-mon-start "$f" 2>/dev/null; do
            redis-cli -p "$p" echo rjq-mon-start >/dev/null
        done
    done
}
monitor_stop() { # monitor_stop PORT...: each tap saw its node's last command, then stops
    local i=0 p
    for p in "$@"; do
        until grep -q rjq-mon-end "${MON_FILES[$i]}"; do redis-cli -p "$p" echo rjq-mon-end >/dev/null; done
        kill "${MON_PIDS[$i]}"
        wait "${MON_PIDS[$i]}" 2>/dev/null || true
        i=$((i + 1))
    done
}
# script calls by function over a run (its warm-up included), per measured job
count_calls() { # count_calls NAME LABEL CASE FILE...
    /usr/bin/python3 - "$@" "$(tail -1 "$DIR/results")" <<'EOF'
import collections, json, re, sys
name, label, case = sys.argv[1:4]
files, last = sys.argv[4:-1], sys.argv[-1]
jobs = json.loads(last)["jobs"] or 1
n, other = collections.Counter(), collections.Counter()
for f in files:
    for line in open(f, errors="replace"):
        m = re.search(r'\] "(?:FCALL|fcall|EVALSHA|evalsha)" "([^"]+)"', line)
        if m:
            n[m.group(1)] += 1
        elif " lua]" not in line and (m := re.search(r'\] "([A-Za-z]+)"', line)) and m.group(1).lower() not in ("echo", "monitor"):
            other[m.group(1).upper()] += 1
print(json.dumps({"server": name, "bench": label, "case": case, "jobs": jobs,
                  "script_calls_per_job": {k: round(v / jobs, 4) for k, v in n.most_common()},
                  "jobs_per_call": {k: round(jobs / v, 2) for k, v in n.most_common()},
                  "other_commands_per_job": {k: round(v / jobs, 4) for k, v in other.most_common()}}))
EOF
}
# the hook the bench calls (zero, dump) around its measured phase: callgrind's
# counters on the nodes of CG_PIDS, an strace -c per node of ST_PIDS (into ST_OUT.<pid>),
# the context switches of each node's main thread (CS_PIDS, into CS_OUT.zero/.dump)
cat >"$DIR/cg_hook.sh" <<'HOOK'
#!/bin/bash
for p in $CS_PIDS; do
    # pid, voluntary and involuntary context switches, utime and stime (clock ticks, every thread)
    echo "$p $(sed -n 's/^\(nonvoluntary\|voluntary\)_ctxt_switches:[[:space:]]*//p' /proc/$p/status | tr '\n' ' ')" \
        "$(sed 's/^.*) //' /proc/$p/stat | cut -d' ' -f12,13)"
done >>"$CS_OUT.$1"
for p in $CG_PIDS; do
    case "$1" in
    zero) callgrind_control -z "$p" >/dev/null ;;
    dump) callgrind_control --dump="$CG_TAG" "$p" >/dev/null ;;
    esac
done
for p in $ST_PIDS; do
    case "$1" in
    zero)
        strace -c -f -p "$p" -o "$ST_OUT.$p" </dev/null >/dev/null 2>"$ST_OUT.$p.err" &
        echo $! >"$ST_OUT.$p.pid"
        # (attached once strace says so: "Process N attached [with T threads]")
        until grep -q attached "$ST_OUT.$p.err" 2>/dev/null; do sleep 0.01; done ;;
    dump)
        s=$(cat "$ST_OUT.$p.pid")
        kill -INT "$s"
        while kill -0 "$s" 2>/dev/null; do sleep 0.01; done ;;
    esac
done
HOOK
chmod +x "$DIR/cg_hook.sh"
# instructions of the last dump of each node, per measured job
count_instr() { # count_instr NAME LABEL CASE PORT...
    local name=$1 label=$2 case=$3 p f ir total=0 parts=()
    shift 3
    for p in "$@"; do
        f=$(ls -t "$DIR/$p"/cg.out."${NODE_PID[$p]}".* 2>/dev/null | head -1)
        ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$f" | head -1)
        total=$((total + ir))
        parts+=("$ir")
    done
    /usr/bin/python3 -c '
import json, sys
name, label, case, total, last = sys.argv[1:6]
parts = [int(x) for x in sys.argv[6:]]
jobs = json.loads(last)["jobs"] or 1
print(json.dumps({"server": name, "bench": label, "case": case, "jobs": jobs,
                  "redis_instructions_per_job": round(int(total) / jobs),
                  "per_master": [round(x / jobs) for x in parts]}))' \
        "$name" "$label" "$case" "$total" "$(tail -1 "$DIR/results")" "${parts[@]}"
}
# system calls of the measured phase, summed over the nodes, per job
count_syscalls() { # count_syscalls NAME LABEL CASE FILE...
    /usr/bin/python3 - "$@" "$(tail -1 "$DIR/results")" <<'EOF'
import collections, json, sys
name, label, case = sys.argv[1:4]
files, last = sys.argv[4:-1], sys.argv[-1]
jobs = json.loads(last)["jobs"] or 1
n, per, wake = collections.Counter(), [], []
for f in files:
    total, m = 0, collections.Counter()
    for line in open(f):
        w = line.split()
        # "% time seconds usecs/call calls [errors] syscall"
        if len(w) >= 5 and w[0][0].isdigit() and w[-1] != "total":
            n[w[-1]] += int(w[3])
            m[w[-1]] += int(w[3])
            total += int(w[3])
    per.append(round(total / jobs, 3))
    wake.append(round(m["epoll_wait"] / jobs, 3))
print(json.dumps({"server": name, "bench": label, "case": case, "jobs": jobs,
                  "syscalls_per_job": round(sum(n.values()) / jobs, 3), "per_master": per,
                  "epoll_wait_per_job": round(n["epoll_wait"] / jobs, 3),
                  "epoll_wait_per_job_per_master": wake,
                  "by_call": {k: round(v / jobs, 3) for k, v in n.most_common(8)}}))
EOF
}
# context switches of the nodes' main threads over the measured phase, per job
count_ctx() { # count_ctx NAME LABEL CASE PREFIX
    /usr/bin/python3 - "$@" "$(tail -1 "$DIR/results")" <<'EOF'
import json, os, sys
name, label, case, prefix, last = sys.argv[1:6]
jobs = json.loads(last)["jobs"] or 1
read = lambda f: {w[0]: [int(x) for x in w[1:]] for w in (l.split() for l in open(f)) if len(w) >= 3}
a, b = read(prefix + ".zero"), read(prefix + ".dump")
vol = sum(b[p][0] - a[p][0] for p in b if p in a)
inv = sum(b[p][1] - a[p][1] for p in b if p in a)
tck = os.sysconf("SC_CLK_TCK")
# /proc/PID/stat's utime + stime (every thread of the process), per job, per master in order
cpu = [(b[p][2] + b[p][3] - a[p][2] - a[p][3]) * 1e6 / tck / jobs for p in b if p in a and len(b[p]) >= 4]
print(json.dumps({"server": name, "bench": label, "case": case, "jobs": jobs,
                  "voluntary_ctxt_switches_per_job": round(vol / jobs, 3),
                  "voluntary_per_master": [round((b[p][0] - a[p][0]) / jobs, 3) for p in b if p in a],
                  "involuntary_ctxt_switches_per_job": round(inv / jobs, 3),
                  "proc_cpu_us_per_job": round(sum(cpu), 2), "proc_cpu_per_master": [round(x, 2) for x in cpu]}))
EOF
}
run() { # run NAME URL CASE [ENV...]
    local name=$1 url=$2 case=$3 tag ports=("${PORTS[@]}")
    shift 3
    case $name in standalone*) ports=("$SA") ;; esac
    for tag in $BENCHES; do
        local label=${tag%%=*} bench=${tag#*=}
        RUN=$((RUN + 1))
        [ "$CALLS" = 1 ] && monitor_start "${ports[@]}"
        local cg=() cs=() p
        for p in "${ports[@]}"; do cs+=("${NODE_PID[$p]}"); done
        cg=(CG_HOOK="$DIR/cg_hook.sh" CS_PIDS="${cs[*]}" CS_OUT="$DIR/cs.$RUN")
        if [ "${VALGRIND:-0}" = 1 ]; then
            local pids=() p
            for p in "${ports[@]}"; do pids+=("${NODE_PID[$p]}"); done
            cg+=(CG_PIDS="${pids[*]}" CG_TAG="run$RUN")
        elif [ "${STRACE:-0}" = 1 ]; then
            local pids=() p
            for p in "${ports[@]}"; do pids+=("${NODE_PID[$p]}"); done
            cg+=(ST_PIDS="${pids[*]}" ST_OUT="$DIR/st.$RUN.$name.$case")
        fi
        # (in the background, waited for: a signal's trap runs at once, not
        # once the bench has ended)
        { env REDIS_URL="$url" PREFIX="b$RANDOM" "${cg[@]}" "$@" "$bench" "$case" |
            sed "s/^{/{\"server\":\"$name\",\"bench\":\"$label\",/" | tee -a "$DIR/results"; } &
        wait $!
        [ -e "$DIR/cs.$RUN.dump" ] && count_ctx "$name" "$label" "$case" "$DIR/cs.$RUN" |
            tee -a "$DIR/ctx"
        if [ "${VALGRIND:-0}" = 1 ]; then
            count_instr "$name" "$label" "$case" "${ports[@]}" | tee -a "$DIR/instr"
        elif [ "${STRACE:-0}" = 1 ]; then
            local files=() p
            for p in "${ports[@]}"; do files+=("$DIR/st.$RUN.$name.$case.${NODE_PID[$p]}"); done
            count_syscalls "$name" "$label" "$case" "${files[@]}" | tee -a "$DIR/syscalls"
        fi
        if [ "$CALLS" = 1 ]; then
            monitor_stop "${ports[@]}"
            count_calls "$name" "$label" "$case" "${MON_FILES[@]}" | tee -a "$DIR/calls"
            rm -f "${MON_FILES[@]}"
        fi
    done
}
for rep in $(seq "$REPS"); do
    for c in $CASES; do
        for round in standalone cluster; do
            case $c in sharded | place | paced*) continue ;; esac
            url=$STANDALONE
            [ $round = cluster ] && url=$CLUSTER
            case $c in
            drain) run $round "$url" drain N="$N_DRAIN" ;;
            awaited) run $round "$url" awaited N="$N_AWAIT" WINDOW="${WINDOW:-200}" ;;
            idle) run $round "$url" idle IDLE_SECS="$IDLE_SECS" ;;
            esac
        done
        if [ "$c" = paced ] || [ "$c" = paced-sharded ]; then
            rate=${RATE:-600} secs=${PACED_SECS:-15}
            third=$((rate / 3))
            pw=(WINDOW="${PACED_WINDOW:-2000}")
            if [ "$c" = paced ]; then
                run standalone "$STANDALONE" awaited N=$((rate * secs)) RATE=$rate "${pw[@]}"
                run standalone-third "$STANDALONE" awaited N=$((third * secs)) RATE=$third "${pw[@]}"
                run cluster "$CLUSTER" awaited N=$((rate * secs)) RATE=$rate "${pw[@]}"
                # the same client, queues and workers with no jobs: what a second costs
                # without work (timers, the client's beats), to take out of the per-job figures
                run standalone-quiet "$STANDALONE" idle QUEUES=30 SETTLE=2 IDLE_SECS="$secs"
                run cluster-quiet "$CLUSTER" idle QUEUES=30 SETTLE=2 IDLE_SECS="$secs"
            else
                run cluster-1q "$CLUSTER" awaited N=$((rate * secs)) RATE=$rate QUEUES=1 "${pw[@]}"
                run cluster-1q-third "$CLUSTER" awaited N=$((third * secs)) RATE=$third QUEUES=1 "${pw[@]}"
                run cluster-sharded "$CLUSTER" awaited N=$((rate * secs)) RATE=$rate QUEUES=1 \
                    SHARDS="${SHARDS:-3}" "${pw[@]}"
            fi
        fi
        if [ "$c" = flow-sharded ]; then
            for r in ${RATES:-300 1000 3000 10000 0}; do
                fs=${FLOW_SECS:-10}
                if [ "$r" = 0 ]; then
                    run cluster-1q@0 "$CLUSTER" flow N="${N_FLOW:-30000}" RATE=0 QUEUES=1
                    run cluster-sharded@0 "$CLUSTER" flow N="${N_FLOW:-30000}" RATE=0 QUEUES=1 \
                        SHARDS="${SHARDS:-3}"
                    continue
                fi
                run "cluster-1q@$r" "$CLUSTER" flow N=$((r * fs)) RATE="$r" QUEUES=1
                run "cluster-1q-third@$r" "$CLUSTER" flow N=$((r * fs / 3)) RATE=$((r / 3)) QUEUES=1
                run "cluster-sharded@$r" "$CLUSTER" flow N=$((r * fs)) RATE="$r" QUEUES=1 \
                    SHARDS="${SHARDS:-3}"
            done
        fi
        if [ "$c" = sharded ]; then
            run cluster-1q "$CLUSTER" drain N="$N_DRAIN" QUEUES=1
            run cluster-sharded "$CLUSTER" drain N="$N_DRAIN" QUEUES=1 SHARDS="${SHARDS:-3}" \
                CONC="${SHARDED_CONC:-${CONC:-8}}"
        fi
        if [ "$c" = place ]; then
            for slow in 0 1; do
                for pol in rr least; do
                    sp=
                    if [ $slow = 1 ]; then # one master paused SLOW_PAUSE_MS of every 2x that
                        ms=${SLOW_PAUSE_MS:-20}
                        (while :; do
                            redis-cli -p "${PORTS[1]}" client pause "$ms" all >/dev/null
                            sleep "$(awk "BEGIN{print $ms * 2 / 1000}")"
                        done) &
                        sp=$!
                    fi
                    run "place-slow$slow" "$CLUSTER" place N="${N_PLACE:-30000}" SHARDS=3 \
                        POLICY=$pol WINDOW="${PLACE_WINDOW:-500}"
                    if [ -n "$sp" ]; then kill "$sp"; wait "$sp" 2>/dev/null || true; fi
                done
            done
        fi
        # the spread with 30 queues named so that each master has 10 (EVEN=1)
        if [ "$c" = drain ] && [ "${EVEN_RUN:-1}" = 1 ]; then run cluster-even "$CLUSTER" drain N="$N_DRAIN" EVEN=1; fi
    done
done
# the ratios: cluster / standalone of Redis CPU per job (per bench; medians over REPS)
if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    for p in "$SA" "${PORTS[@]}"; do
        for f in "$DIR/$p"/cg.out.*; do [ -e "$f" ] && cp "$f" "$KEEP/$p.${f##*/}"; done
    done
    cp "$DIR"/st.* "$DIR/results" "$KEEP/" 2>/dev/null || true
fi
/usr/bin/python3 - "$DIR/results" "$DIR/calls" "$DIR/instr" "$DIR/syscalls" "$DIR/ctx" <<'EOF'
import collections, json, os, statistics, sys
r = collections.defaultdict(list)
for line in open(sys.argv[1]):
    d = json.loads(line)
    r[(d["server"], d["bench"], d["case"])].append(d)
med = lambda runs, k: statistics.median(x[k] for x in runs)
benches = sorted({k[1] for k in r}, key=lambda b: min(i for i, k in enumerate(r) if k[1] == b))
for b in benches:
    for case in ("drain", "awaited"):
        s, c = r.get(("standalone", b, case)), r.get(("cluster", b, case))
        if not s or not c:
            continue
        sc, cc = med(s, "redis_cpu_us_per_job"), med(c, "redis_cpu_us_per_job")
        print(f"[{b}] {case}: Redis CPU per job {cc:.2f} us (cluster, summed over "
              f"{c[0]['masters']} masters) / {sc:.2f} us (standalone) = {cc / sc:.2f}x "
              f"(runs: {', '.join('%.1f' % x['redis_cpu_us_per_job'] for x in c)} / "
              f"{', '.join('%.1f' % x['redis_cpu_us_per_job'] for x in s)}); commands per job "
              f"{med(c, 'commands_per_job'):.3f} / {med(s, 'commands_per_job'):.3f}; the client's "
              f"CPU per job {med(c, 'client_cpu_us_per_job'):.2f} / "
              f"{med(s, 'client_cpu_us_per_job'):.2f} us")
        if "redis_sys_us_per_job" in c[0] and "redis_sys_us_per_job" in s[0]:
            ks, kc = med(s, "redis_sys_us_per_job"), med(c, "redis_sys_us_per_job")
            print(f"[{b}] {case}: of it in the kernel (used_cpu_sys) {kc:.2f} / {ks:.2f} us "
                  f"= {kc / ks:.2f}x; user space {cc - kc:.2f} / {sc - ks:.2f} us "
                  f"= {(cc - kc) / (sc - ks):.2f}x")
        shares = [m["commands_share"] for m in c[0]["per_master"]]
        print(f"[{b}] {case}: each master's share of the commands (30 queues cb0..cb29): "
              + ", ".join(f"{x * 3:.2f} of a third" for x in shares))
        c0, s0 = c[0], s[0]
        print(f"[{b}] {case}: cluster bus publish messages per job {c0['bus_publish_per_job']:.2f}; "
              "calls per job (cluster / standalone): " + ", ".join(
                  f"{k} {c0['calls'].get(k, 0) / c0['jobs']:.3f}/{s0['calls'].get(k, 0) / s0['jobs']:.3f}"
                  for k in sorted(set(c0['calls']) | set(s0['calls']),
                                  key=lambda k: -c0['calls'].get(k, 0))[:6]))
    e = r.get(("cluster-even", b, "drain"))
    if e:
        e = e[0]
        print(f"[{b}] drain, 10 queues on each master: shares of the commands "
              + ", ".join(f"{m['commands_share'] * 3:.2f}" for m in e["per_master"])
              + " of a third; of the CPU "
              + ", ".join(f"{m['cpu_share'] * 3:.2f}" for m in e["per_master"]))
    s, c = r.get(("standalone", b, "idle")), r.get(("cluster", b, "idle"))
    if s and c:
        print(f"[{b}] idle: 1000 idle queues: {med(c, 'commands_per_s'):.1f} commands/s on the "
              f"cluster (summed), {med(s, 'commands_per_s'):.1f} on the standalone server")
for b in benches:
    u, h = r.get(("cluster-1q", b, "drain")), r.get(("cluster-sharded", b, "drain"))
    if u and h:
        uc, hc = med(u, "redis_cpu_us_per_job"), med(h, "redis_cpu_us_per_job")
        print(f"[{b}] sharded: one queue drained, Redis CPU per job {hc:.2f} us (3 shards, summed "
              f"over {h[0]['masters']} masters) / {uc:.2f} us (unsharded) = {hc / uc:.2f}x; "
              f"commands per job {med(h, 'commands_per_job'):.3f} / {med(u, 'commands_per_job'):.3f}; "
              f"jobs/s {med(h, 'jobs_per_s'):.0f} / {med(u, 'jobs_per_s'):.0f}; the client's CPU "
              f"per job {med(h, 'client_cpu_us_per_job'):.2f} / {med(u, 'client_cpu_us_per_job'):.2f} us")
        h0, u0 = h[0], u[0]
        print(f"[{b}] sharded: each master's share (of a third): commands "
              + ", ".join(f"{m['commands_share'] * 3:.2f}" for m in h0["per_master"]) + "; CPU "
              + ", ".join(f"{m['cpu_share'] * 3:.2f}" for m in h0["per_master"]))
        print(f"[{b}] sharded: calls per job (sharded / unsharded): " + ", ".join(
            f"{k} {h0['calls'].get(k, 0) / h0['jobs']:.3f}/{u0['calls'].get(k, 0) / u0['jobs']:.3f}"
            for k in sorted(set(h0['calls']) | set(u0['calls']),
                            key=lambda k: -h0['calls'].get(k, 0))[:8]))
    for slow in ("place-slow0", "place-slow1"):
        for x in r.get((slow, b, "place"), []):
            print(f"[{b}] {slow} {x['policy']}: {x['jobs_per_s']} jobs/s done, enqueued "
                  f"{x['enqueued_per_s']}/s; depth spread max {x['depth_spread_max']}, mean "
                  f"{x['depth_spread_mean']}, ready per shard at the end of enqueue "
                  f"{x['ready_at_end_of_enqueue']}, placed {x['placed']}; Redis CPU per job "
                  f"{x['redis_cpu_us_per_job']} us")
# the paced cases: one table row per run (per job; the cluster's masters also one by one)
extra = collections.defaultdict(dict)
for i, key in ((4, "st"), (5, "cs"), (3, "ir")):
    if os.path.exists(sys.argv[i]):
        for line in open(sys.argv[i]):
            d = json.loads(line)
            extra[(d["server"], d["bench"])][key] = d
paced = [k for k in r if k[2] == "awaited" and (k[0].startswith("standalone-third") or
         k[0].startswith("cluster-1q") or k[0] == "cluster-sharded" or
         ("standalone-third", k[1], "awaited") in r or ("cluster-1q", k[1], "awaited") in r)]
quiet = {k[0]: v[0] for k, v in r.items() if k[0].endswith("-quiet")}
for k in paced:
    x = r[k][0]
    q = quiet.get(("cluster" if x["masters"] > 1 else "standalone") + "-quiet")
    if q and k[0] in ("standalone", "standalone-third", "cluster"):
        base = q["redis_cpu_s"] / q["secs"]
        net = (x["redis_cpu_s"] - base * x["secs"]) * 1e6 / x["jobs"]
        print(f"{k[0]} [{k[1]}]: Redis CPU per job {x['redis_cpu_us_per_job']:.1f} us, of it "
              f"{base * 1e6 / x['jobs_per_s']:.1f} us what the same client costs with no jobs "
              f"({base * 1e3:.2f} ms/s, {q['commands_per_s']:.1f} commands/s): net {net:.1f} us")
if paced:
    print("paced awaited runs, per job (CPU and sys: INFO used_cpu_*; wake-ups: epoll_wait "
          "(STRACE=1) or voluntary context switches; instructions: VALGRIND=1):")
    print("| run | jobs/s | masters | Redis CPU us | of it sys us | fcall | commands | "
          "epoll_wait | syscalls | vol. ctx sw. | instructions |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in paced:
        x = r[k][0]
        e = extra.get((k[0], k[1]), {})
        st, cs, ir = e.get("st", {}), e.get("cs", {}), e.get("ir", {})
        fc = x["calls"].get("fcall", 0) / x["jobs"]
        row = [f"{k[0]} [{k[1]}]", f"{x['jobs_per_s']}", f"{x['masters']}",
               f"{x['redis_cpu_us_per_job']:.1f}", f"{x['redis_sys_us_per_job']:.1f}", f"{fc:.3f}",
               f"{x['commands_per_job']:.2f}", f"{st.get('epoll_wait_per_job', '-')}",
               f"{st.get('syscalls_per_job', '-')}", f"{cs.get('voluntary_ctxt_switches_per_job', '-')}",
               f"{ir.get('redis_instructions_per_job', '-')}"]
        print("| " + " | ".join(row) + " |")
        if x["masters"] > 1:
            for j, m in enumerate(x["per_master"]):
                w = st.get("epoll_wait_per_job_per_master", [])
                sc = st.get("per_master", [])
                ip = ir.get("per_master", [])
                print(f"|  master {j} | | | {m['cpu_us_per_job']:.1f} | {m['sys_us_per_job']:.1f} | | "
                      f"{m['commands_share'] * x['commands_per_job']:.2f} | "
                      f"{w[j] if j < len(w) else '-'} | {sc[j] if j < len(sc) else '-'} | | "
                      f"{ip[j] if j < len(ip) else '-'} |")
flows = [k for k in r if k[2] == "flow"]
if flows:
    print("flow runs (one queue, plain jobs in batches at a fixed offered load), per job summed "
          "over the masters (CPU: INFO used_cpu_*; /proc: utime+stime; wake-ups: epoll_wait "
          "(STRACE=1), voluntary context switches; instructions: VALGRIND=1):")
    print("| run | jobs/s | Redis CPU us | /proc CPU us | of it sys us | fcall | commands | "
          "epoll_wait | vol. ctx sw. (per master) | instructions (per master) | client CPU us |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in flows:
        x = r[k][0]
        e = extra.get((k[0], k[1]), {})
        st, cs, ir = e.get("st", {}), e.get("cs", {}), e.get("ir", {})
        fc = x["calls"].get("fcall", 0) / x["jobs"]
        vpm = "/".join(str(v) for v in cs.get("voluntary_per_master", []))
        ipm = "/".join(str(v) for v in ir.get("per_master", []))
        print(f"| {k[0]} [{k[1]}] | {x['jobs_per_s']} | {x['redis_cpu_us_per_job']:.2f} | "
              f"{cs.get('proc_cpu_us_per_job', '-')} | {x['redis_sys_us_per_job']:.2f} | {fc:.3f} | "
              f"{x['commands_per_job']:.3f} | {st.get('epoll_wait_per_job', '-')} "
              f"({'/'.join(str(v) for v in st.get('epoll_wait_per_job_per_master', []))}) | "
              f"{cs.get('voluntary_ctxt_switches_per_job', '-')} ({vpm}) | "
              f"{ir.get('redis_instructions_per_job', '-')} ({ipm}) | {x['client_cpu_us_per_job']:.2f} |")
    cpu = {k[0]: r[k][0]["redis_cpu_us_per_job"] for k in flows}
    for k in flows:
        if k[0].startswith("cluster-sharded@"):
            rr = k[0].split("@")[1]
            u, t = cpu.get("cluster-1q@" + rr), cpu.get("cluster-1q-third@" + rr)
            print(f"sharded @{rr}/s: Redis CPU {cpu[k[0]]:.2f} us; / unsharded at the same rate "
                  + (f"{cpu[k[0]] / u:.2f}x" if u else "-") + "; / unsharded at a master's share "
                  + (f"{cpu[k[0]] / t:.2f}x" if t else "-"))
if os.path.exists(sys.argv[2]):
    print("script calls per job (MONITOR):")
    for line in open(sys.argv[2]):
        print("  " + line.rstrip())
if os.path.exists(sys.argv[3]):
    print("Redis instructions per job (callgrind, summed over the masters):")
    for line in open(sys.argv[3]):
        print("  " + line.rstrip())
if os.path.exists(sys.argv[4]):
    print("Redis system calls per job (strace -c -f, summed over the masters):")
    for line in open(sys.argv[4]):
        print("  " + line.rstrip())
if os.path.exists(sys.argv[5]):
    print("context switches of Redis' main threads per job (wake-ups: voluntary; summed):")
    for line in open(sys.argv[5]):
        print("  " + line.rstrip())
EOF
