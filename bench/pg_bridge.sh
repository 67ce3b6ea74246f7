#!/usr/bin/env bash
# Measures rjq-pg-bridge on a private PostgreSQL and a private Redis (free
# ports, a temp dir, stopped by pid): rows/s moved, and insert-to-start
# latency at RATE rows/s with notifications (the bridge as it runs) and
# with only a 5 s poll (the trigger dropped: the design it replaces).
#
#   bash bench/pg_bridge.sh [BUILD_DIR]    (default: build)
#   MOVE_ROWS=100000 RATE=1000 SECONDS_=20 REPS=3 bash bench/pg_bridge.sh
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
MOVE_ROWS=${MOVE_ROWS:-100000}
RATE=${RATE:-1000}
SECS=${SECONDS_:-20}
REPS=${REPS:-3}
BATCH=${BATCH:-500}
dir=$(mktemp -d /tmp/rjq-pgbench-XXXXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; as_pg=(runuser -u postgres --); fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pgport=$(free_port); rport=$(free_port)
bridge_pid=""
cleanup() {
  [ -n "$bridge_pid" ] && kill "$bridge_pid" 2>/dev/null && wait "$bridge_pid" 2>/dev/null || true
  [ -f "$dir/redis.pid" ] && kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
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
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir"
export RJQ_PG="host=127.0.0.1 port=$pgport user=postgres dbname=postgres"
export RJQ_URL="redis://127.0.0.1:$rport"
"$B/rjq-pg-bridge" --init >/dev/null
start_bridge() {
  "$B/rjq-pg-bridge" --batch "$BATCH" --report-ms 0 "$@" 2>"$dir/bridge.log" &
  bridge_pid=$!
  sleep 0.5
}
stop_bridge() { kill "$bridge_pid"; wait "$bridge_pid" || true; bridge_pid=""; }
# between runs: the rows first (so no row of the last run is moved again
# when its job goes with the FLUSHALL), then Redis
flush() {
  psql -q "$RJQ_PG" -c "TRUNCATE rjq_jobs"
  sleep 0.3
  redis-cli -p "$rport" FLUSHALL >/dev/null
}

start_bridge
for _ in $(seq "$REPS"); do flush; "$B/rjq-pg-bench" move "$MOVE_ROWS"; done
for _ in $(seq "$REPS"); do flush; "$B/rjq-pg-bench" latency "$RATE" "$SECS"; done
stop_bridge
# the design it replaces: no notification, a poll every 5 s
psql -q "$RJQ_PG" -c "DROP TRIGGER rjq_jobs_inserted ON rjq_jobs"
start_bridge --poll-ms 5000
flush; "$B/rjq-pg-bench" latency "$RATE" "$SECS" | sed 's/pg-bridge-latency/pg-bridge-latency-poll-5s/'
stop_bridge
