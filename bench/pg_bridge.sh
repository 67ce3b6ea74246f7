#!/usr/bin/env bash
# Measures rjq-pg-bridge on a private PostgreSQL and a private Redis (free
# ports, a temp dir, stopped by pid), once per Redis durability setting
# (REDIS_MODES: "always" = appendonly yes + appendfsync always, "default" =
# redis-server's defaults, no AOF):
#
#   backlog  BACKLOG rows inserted by a client in TX-row transactions
#            (9/10 as one multi-row INSERT per transaction, 1/10 as TX
#            single-row INSERTs between BEGIN and COMMIT), no bridge
#            running: the client's rows/s; then a bridge started: rows/s
#            from its start until every row is a job in Redis and marked
#            in PostgreSQL, and the ratio to each insert rate
#   lag      a bridge running, RATE rows/s inserted one per transaction
#            by INSERTERS (8) connections taking turns, for SECS s: INSERT
#            commit to the job's "enqueued" event, p50/p99/max (one
#            connection commits at most one row per fsync)
#   latency  (CASES=... latency) the older case: insert to a worker's start
#   poll     (CASES=... poll) the same with the trigger dropped and a 5 s poll
#
# Each case runs once per bridge of BRIDGES ("label=path ...", default
# "after=BUILD_DIR/rjq-pg-bridge"; e.g. a build of an older commit as
# "before=/tmp/old/rjq-pg-bridge after=build/rjq-pg-bridge"), each result
# labelled with the Redis mode and the bridge. REPS (1) repeats each
# case, the bridges interleaved (before, after, before, after, ...).
#
#   bash bench/pg_bridge.sh [BUILD_DIR]    (default: build)
#   BACKLOG=30000 TX=100 RATE=200 SECS=15 INSERTERS=8 REDIS_MODES="always default" \
#   CASES="backlog lag" BRIDGE_ARGS="..." BRIDGES="..." bash bench/pg_bridge.sh
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
BACKLOG=${BACKLOG:-30000}
TX=${TX:-100}
RATE=${RATE:-200}
SECS=${SECS:-${SECONDS_:-15}}
REDIS_MODES=${REDIS_MODES:-always default}
CASES=${CASES:-backlog lag}
BRIDGE_ARGS=${BRIDGE_ARGS:-}
BRIDGES=${BRIDGES:-after=$B/rjq-pg-bridge}
REPS=${REPS:-1}
dir=$(mktemp -d /tmp/rjq-pgbench-XXXXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; as_pg=(runuser -u postgres --); fi
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pgport=$(free_port)
bridge_pid=""
stop_redis() {
  if [ -f "$dir/redis.pid" ]; then
    pid=$(cat "$dir/redis.pid"); kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/redis.pid"
  fi
}
cleanup() {
  [ -n "$bridge_pid" ] && kill "$bridge_pid" 2>/dev/null && wait "$bridge_pid" 2>/dev/null || true
  stop_redis
  if [ -f "$dir/data/postmaster.pid" ]; then
    pid=$(head -1 "$dir/data/postmaster.pid"); kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
bin=$(pg_config --bindir)
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C >/dev/null
# the server's defaults (fsync and synchronous commit on): a production-like commit
"${as_pg[@]}" "$bin/pg_ctl" -s -D "$dir/data" -l "$dir/pg.log" -w \
  -o "-p $pgport -k $dir -c listen_addresses=127.0.0.1" start
export RJQ_PG="host=127.0.0.1 port=$pgport user=postgres dbname=postgres"
# rjq-pg-bench reads PostgreSQL's CPU (all its processes) from /proc by it
PG_PID=$(head -1 "$dir/data/postmaster.pid"); export PG_PID
"$B/rjq-pg-bridge" --init --pg "$RJQ_PG" >/dev/null
bridge_cmd=()
start_bridge() {
  "${bridge_cmd[@]}" "$@" 2>>"$dir/bridge.log" &
  bridge_pid=$!
  sleep 0.5
}
stop_bridge() { kill "$bridge_pid"; wait "$bridge_pid" || true; bridge_pid=""; }
# between runs: the rows first (so no row of the last run is moved again
# when its job goes with the FLUSHALL), then Redis
flush() {
  psql -q "$RJQ_PG" -c "TRUNCATE rjq_jobs" -c "VACUUM ANALYZE rjq_jobs"
  redis-cli -p "$rport" FLUSHALL >/dev/null
}
# Redis' CPU seconds (user + sys) so far
redis_cpu() { redis-cli -p "$rport" INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { t += $2 } END { print t }'; }
# adds "redis":MODE,"bridge":LABEL after the case name
label() { sed "s/^{\"case\":\"\([^\"]*\)\"/{\"case\":\"\1\",\"redis\":\"$1\",\"bridge\":\"$2\"/"; }
echo "# $(date -u '+%F %T') UTC, $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'), BACKLOG=$BACKLOG TX=$TX RATE=$RATE SECS=$SECS REPS=$REPS BRIDGES=$BRIDGES BRIDGE_ARGS=$BRIDGE_ARGS"
for mode in $REDIS_MODES; do
  rport=$(free_port)
  case $mode in
    always) aof=(--appendonly yes --appendfsync always) ;;
    default) aof=() ;;
    *) echo "REDIS_MODES: always or default" >&2; exit 2 ;;
  esac
  redis-server --port "$rport" --bind 127.0.0.1 --save '' "${aof[@]}" --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir"
  for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
  export RJQ_URL="redis://127.0.0.1:$rport"
  for c in $CASES; do
    for lb in $(for _ in $(seq "$REPS"); do echo $BRIDGES; done); do
      name=${lb%%=*}
      # shellcheck disable=SC2206
      bridge_cmd=("${lb#*=}" --report-ms 0 $BRIDGE_ARGS)
      case $c in
        backlog)
          flush; redis-cli -p "$rport" CONFIG RESETSTAT >/dev/null; r0=$(redis_cpu)
          out=$("$B/rjq-pg-bench" backlog "$BACKLOG" "$TX" "${bridge_cmd[@]}" 2>>"$dir/bridge.log")
          r1=$(redis_cpu)
          rus=$(awk -v a="$r0" -v b="$r1" -v n="$BACKLOG" 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')
          echo "${out%\}},\"redis_cpu_us_per_row\":$rus}" | label "$mode" "$name"
          if [ "${PROFILE:-0}" = 1 ]; then  # the scripts' and commands' time, per row
            redis-cli -p "$rport" INFO commandstats | tr -d '\r' | awk -F'[:=,]' -v n="$BACKLOG" \
              '/^cmdstat_/ { printf "#   %s calls=%s usec_per_row=%.1f\n", $1, $3, $5 / n }'
          fi ;;
        lag) flush; start_bridge; "$B/rjq-pg-bench" lag "$RATE" "$SECS" | label "$mode" "$name"; stop_bridge ;;
        latency) flush; start_bridge; "$B/rjq-pg-bench" latency "$RATE" "$SECS" | label "$mode" "$name"; stop_bridge ;;
        poll)
          psql -q "$RJQ_PG" -c "DROP TRIGGER rjq_jobs_inserted ON rjq_jobs"
          flush; start_bridge --poll-ms 5000
          "$B/rjq-pg-bench" latency "$RATE" "$SECS" | sed 's/pg-bridge-latency/pg-bridge-latency-poll-5s/' | label "$mode" "$name"
          stop_bridge
          "$B/rjq-pg-bridge" --init --pg "$RJQ_PG" >/dev/null ;;
      esac
    done
  done
  stop_redis
done
if [ "${KEEP_LOG:-0}" = 1 ]; then cp "$dir/bridge.log" /tmp/rjq-pgbench-bridge.log; fi
