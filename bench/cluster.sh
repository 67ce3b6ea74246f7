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
# The cluster's drain also gives the work spread (each master's share of the
# commands). One JSON line per case and server on stdout; the ratios at the end.
#
#   bash bench/cluster.sh            (BUILD=build, N_DRAIN=60000, N_AWAIT=20000,
#                                     IDLE_SECS=30; the servers are stopped by pid)
set -euo pipefail
BUILD=${BUILD:-build}
BENCH=$BUILD/rjq-cluster-bench
[ -x "$BENCH" ] || { echo "build $BENCH first (make build)" >&2; exit 1; }
N_DRAIN=${N_DRAIN:-60000}
N_AWAIT=${N_AWAIT:-20000}
IDLE_SECS=${IDLE_SECS:-30}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rjq-cluster-bench.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$DIR"
}
trap cleanup EXIT

free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 20000))
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
        --cluster-node-timeout 5000)
    redis-server --port "$port" --bind 127.0.0.1 --dir "$d" --save '' --appendonly no \
        --daemonize no --logfile "$d/log" "${extra[@]}" &
    PIDS+=($!)
    for _ in $(seq 200); do
        redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return
        sleep 0.05
    done
    echo "redis-server on $port did not start" >&2
    exit 1
}

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
run() { # run NAME URL CASE [ENV...]
    local name=$1 url=$2 case=$3
    shift 3
    env REDIS_URL="$url" PREFIX="b$RANDOM" "$@" "$BENCH" "$case" | sed "s/^{/{\"server\":\"$name\",/" |
        tee -a "$DIR/results"
}
for round in standalone cluster; do
    url=$STANDALONE
    [ $round = cluster ] && url=$CLUSTER
    run $round "$url" drain N="$N_DRAIN"
    run $round "$url" awaited N="$N_AWAIT"
    run $round "$url" idle IDLE_SECS="$IDLE_SECS"
done
# the spread with 30 queues named so that each master has 10 (EVEN=1)
run cluster-even "$CLUSTER" drain N="$N_DRAIN" EVEN=1
# the ratios: cluster / standalone of Redis CPU per job
/usr/bin/python3 - "$DIR/results" <<'EOF'
import json, sys
r = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    r[(d["server"], d["case"])] = d
for case in ("drain", "awaited"):
    s, c = r[("standalone", case)], r[("cluster", case)]
    print(f"{case}: Redis CPU per job {c['redis_cpu_us_per_job']:.2f} us (cluster, summed over "
          f"{c['masters']} masters) / {s['redis_cpu_us_per_job']:.2f} us (standalone) = "
          f"{c['redis_cpu_us_per_job'] / s['redis_cpu_us_per_job']:.2f}x; commands per job "
          f"{c['commands_per_job']:.3f} / {s['commands_per_job']:.3f}; the client's CPU per job "
          f"{c['client_cpu_us_per_job']:.2f} / {s['client_cpu_us_per_job']:.2f} us")
    shares = [m["commands_share"] for m in c["per_master"]]
    print(f"{case}: each master's share of the commands (30 queues cb0..cb29): "
          + ", ".join(f"{x * 3:.2f} of a third" for x in shares))
    print(f"{case}: cluster bus publish messages per job {c['bus_publish_per_job']:.2f}; calls per job "
          "(cluster / standalone): " + ", ".join(
              f"{k} {c['calls'].get(k, 0) / c['jobs']:.2f}/{s['calls'].get(k, 0) / s['jobs']:.2f}"
              for k in sorted(set(c['calls']) | set(s['calls']),
                              key=lambda k: -c['calls'].get(k, 0))[:6]))
e = r[("cluster-even", "drain")]
print("drain, 10 queues on each master: shares of the commands "
      + ", ".join(f"{m['commands_share'] * 3:.2f}" for m in e["per_master"]) + " of a third; of the CPU "
      + ", ".join(f"{m['cpu_share'] * 3:.2f}" for m in e["per_master"]))
s, c = r[("standalone", "idle")], r[("cluster", "idle")]
print(f"idle: 1000 idle queues: {c['commands_per_s']:.1f} commands/s on the cluster (summed), "
      f"{s['commands_per_s']:.1f} on the standalone server")
EOF
