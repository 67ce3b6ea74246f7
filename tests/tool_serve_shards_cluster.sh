#!/usr/bin/env bash
# rjq serve with a sharded queue on a 3-master Redis Cluster: the queue is
# one entry (shards 3), its jobs spread over its shards, and
# GET /v1/queues/Q?shards=1 names each shard's master: three distinct
# masters, each one of the cluster's (the slot table `rjq cluster` prints).
# The CLI on the cluster shows the same one queue (issue 35 "Tests": the CLI
# and dashboard show one queue; the dashboard reads these same routes):
# `rjq stats` sums the masters, `--shards` adds each shard, `rjq jobs` lists
# every shard's jobs once, `rjq queues` names the queue once. Dependencies
# on and of the sharded queue: `rjq enqueue --after hq:ID`, `rjq jobs hq
# waiting`, `rjq job`, and serve's dependencies read on the job's shard.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test sc - redis-cli
same() { check; [ "$1" = "$2" ] || fail "$3: '$1', expected '$2'"; }

DIR=$(mktemp -d "${TMPDIR:-/tmp}/rjq-serve-shards-cluster.XXXXXX")
PIDS=()
NODES=()
cleanup() {
    stop_pids
    for p in "${NODES[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${NODES[@]}"; do
        for _ in $(seq 100); do redis_alive "$p" || break; sleep 0.05; done
        kill -KILL "$p" 2>/dev/null
    done
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- three masters (a port whose bus port, + 10000, is below 65536) ------------------------
PORTS=()
for i in 0 1 2; do
    for attempt in 1 2 3 4 5 6 7 8; do # (a free port may be taken before the node binds it)
        for _ in $(seq 20); do
            port=$(redis_free_port) || break
            [ $((port + 10000)) -lt 65536 ] && ! (exec 3<>"/dev/tcp/127.0.0.1/$((port + 10000))") 2>/dev/null && break
        done
        rm -rf "$DIR/n$i"
        mkdir -p "$DIR/n$i"
        redis-server --port "$port" --bind 127.0.0.1 --dir "$DIR/n$i" --save '' --appendonly no \
            --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
            --daemonize yes --pidfile "$DIR/n$i/redis.pid" --logfile "$DIR/n$i/redis.log" >/dev/null
        up=0
        for _ in $(seq 200); do # its log says so once it listens (not another server's port)
            if [ -s "$DIR/n$i/redis.pid" ] && grep -q "Server initialized" "$DIR/n$i/redis.log" 2>/dev/null &&
                redis_alive "$(cat "$DIR/n$i/redis.pid")" && redis_ping "$port"; then
                up=1; break
            fi
            grep -q "aborting" "$DIR/n$i/redis.log" 2>/dev/null && break
            sleep 0.05
        done
        [ "$up" = 1 ] && break
        [ -s "$DIR/n$i/redis.pid" ] && kill "$(cat "$DIR/n$i/redis.pid")" 2>/dev/null
        echo "node $i on port $port did not start (attempt $attempt): $(tail -1 "$DIR/n$i/redis.log")"
    done
    [ "$up" = 1 ] || { echo "FAIL: node $i did not start"; exit 1; }
    NODES+=("$(cat "$DIR/n$i/redis.pid")")
    PORTS+=("$port")
done
redis-cli --cluster create "127.0.0.1:${PORTS[0]}" "127.0.0.1:${PORTS[1]}" "127.0.0.1:${PORTS[2]}" \
    --cluster-replicas 0 --cluster-yes >"$DIR/create.log" 2>&1 ||
    { echo "FAIL: redis-cli --cluster create: $(tail -5 "$DIR/create.log")"; exit 1; }
for _ in $(seq 600); do # until every node says the cluster is ok
    ok=0
    for p in "${PORTS[@]}"; do
        redis-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && ok=$((ok + 1))
    done
    [ "$ok" = 3 ] && break
    sleep 0.05
done
[ "$ok" = 3 ] || { echo "FAIL: the cluster never became ok"; exit 1; }
export RJQ_URL="redis://127.0.0.1:${PORTS[0]}"

"$RJQ" --prefix sc shards hq 3 >/dev/null || fail "rjq shards hq 3"
start_serve main
for id in a b c d e f g h i; do
    CODE=$(curl -s -o "$DIR/b" -w '%{http_code}' -X POST --data "p-$id" "$BASE/v1/queues/hq/jobs?id=$id")
    same "$CODE" 201 "enqueue $id"
done
# the masters are read every 2 s: until each shard has one
for _ in $(seq 400); do
    BODY=$(curl -s "$BASE/v1/queues/hq?shards=1")
    [ "$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(all(x["master"] for x in d["shard_stats"]))' "$BODY" 2>/dev/null)" = True ] && break
    sleep 0.05
done
json() { "$PY" -c "import json,sys; d=json.loads(sys.argv[1]); print($1)" "$BODY"; }
same "$(json 'd["shards"]')" 3 "shards"
same "$(json 'd["stats"]["ready"]')" 9 "stats.ready (summed over the masters)"
same "$(json 'sum(x["stats"]["ready"] for x in d["shard_stats"])')" 9 "the shards' ready add up"
same "$(json 'len(set(x["master"] for x in d["shard_stats"]))')" 3 "three distinct masters"
masters=$(json '" ".join(sorted(x["master"] for x in d["shard_stats"]))')
want=$(printf '127.0.0.1:%s\n' "${PORTS[@]}" | sort | paste -sd' ')
same "$masters" "$want" "the shards' masters are the cluster's"
# each shard's slot is served by the master named (CLUSTER KEYSLOT on it: no MOVED)
for row in $(json '" ".join("%s,%s" % (x["name"], x["master"]) for x in d["shard_stats"])'); do
    name=${row%,*} m=${row#*,}
    check
    redis-cli -p "${m##*:}" get "sc:{$name}:nothing" 2>&1 | grep -q MOVED && fail "$name is not on $m"
done
for _ in $(seq 400); do # (the registry is read once someone lists the queues)
    BODY=$(curl -s "$BASE/v1/queues")
    [[ $BODY == *'"name":"hq"'*'"stats":{'* ]] && break
    sleep 0.05
done
same "$(json '[(q["name"], q["shards"]) for q in d["queues"]]')" "[('hq', 3)]" "the list: hq once"
# ---- the CLI, on the same cluster -----------------------------------------------------------
OUT=$("$RJQ" --prefix sc stats hq 2>"$DIR/err") || fail "rjq stats hq: $(cat "$DIR/err")"
same "$(grep -c '^ready 9$' <<<"$OUT")" 1 "rjq stats hq: ready 9 (summed over the masters)"
same "$(grep -c '^shards 3$' <<<"$OUT")" 1 "rjq stats hq: shards 3"
OUT=$("$RJQ" --prefix sc stats hq --shards --json 2>"$DIR/err") || fail "rjq stats --shards: $(cat "$DIR/err")"
same "$(wc -l <<<"$OUT")" 4 "rjq stats hq --shards --json: the sum and 3 shards"
same "$(grep -o '"ready":[0-9]*' <<<"$OUT" | tail -3 | awk -F: '{s += $2} END {print s}')" 9 \
    "the shards' ready add up"
OUT=$("$RJQ" --prefix sc jobs hq ready 2>"$DIR/err") || fail "rjq jobs hq ready: $(cat "$DIR/err")"
same "$(sort <<<"$OUT" | paste -sd' ')" "a b c d e f g h i" "rjq jobs hq ready: each job once"
OUT=$("$RJQ" --prefix sc queues 2>"$DIR/err") || fail "rjq queues: $(cat "$DIR/err")"
same "$(grep -c 'hq' <<<"$OUT")" 1 "rjq queues: hq once, its shards not"
# dependencies through the sharded queue, its shards on three masters: w of
# hq waits for a of hq (another shard, or the same), p of plain waits for
# w; `rjq jobs hq waiting` and `rjq job` show w waiting, serve reads each
# list on its shard
"$RJQ" --prefix sc enqueue hq x --id w --after hq:a >/dev/null 2>"$DIR/err" ||
    fail "rjq enqueue hq --after hq:a: $(cat "$DIR/err")"
"$RJQ" --prefix sc enqueue plain x --id p --after hq:w >/dev/null 2>"$DIR/err" ||
    fail "rjq enqueue plain --after hq:w: $(cat "$DIR/err")"
OUT=$("$RJQ" --prefix sc jobs hq waiting 2>"$DIR/err") || fail "rjq jobs hq waiting: $(cat "$DIR/err")"
same "$OUT" w "rjq jobs hq waiting"
OUT=$("$RJQ" --prefix sc job hq w 2>"$DIR/err") || fail "rjq job hq w: $(cat "$DIR/err")"
same "$(grep -c '^state *waiting' <<<"$OUT")" 1 "rjq job hq w: waiting"
# rjq job lists them both ways, each read on the id's shard
same "$(grep -c '^dependency hq~[^ ]* a ready counted pending$' <<<"$OUT")" 1 \
    "rjq job hq w: its dependency a, named by its shard"
same "$(grep -c '^dependent plain p$' <<<"$OUT")" 1 "rjq job hq w: its dependent p"
same "$(grep -c '^after_policy fail$' <<<"$OUT")" 1 "rjq job hq w: its policy"
OUT=$("$RJQ" --prefix sc job plain p 2>"$DIR/err") || fail "rjq job plain p: $(cat "$DIR/err")"
same "$(grep -c '^state *waiting' <<<"$OUT")" 1 "rjq job plain p: waiting"
same "$(grep -c '^dependency hq~[^ ]* w waiting counted pending$' <<<"$OUT")" 1 \
    "rjq job plain p: its dependency w, named by its shard"
BODY=$(curl -s "$BASE/v1/queues/hq/jobs/w/dependencies")
same "$(json '[(x["queue"].startswith("hq~"), x["id"], x["state"], x["counted"]) for x in d["dependencies"]]')" \
    "[(True, 'a', 'ready', 'pending')]" "w's dependency: a, named by its shard"
same "$(json '[(x["queue"], x["id"]) for x in d["dependents"]]')" "[('plain', 'p')]" \
    "w's dependents: p, registered with w's shard"
echo "$CHECKS checks, $FAILURES failures"
[ "$FAILURES" = 0 ]
