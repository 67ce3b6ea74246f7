#!/usr/bin/env bash
# The dashboard of rjq serve in a real browser: Debian's chromium, headless,
# driven by playwright-core (npm, installed into the build folder on first
# use). Enqueue from the page and see the job complete without reload,
# replay a dead job, pause a queue, the processes page, the read-only page
# has no action, a token server asks for the token, the demo's controls
# run jobs through its worker pool, and with Redis gone (the last step) the
# page turns red. Screenshots: <build>/artifacts/.
# Skipped (with the reason) only where chromium or npm cannot be installed.
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
# shellcheck source=tests/serve_test.bash
. "$SRC/tests/serve_test.bash"
serve_test d dashboard browser worker

start_serve ro --read-only; RO_BASE=$BASE
TOKEN=dashboard-token-0123456789
printf '%s\n' "$TOKEN" >"$DIR/token"
start_serve tok --token-file "$DIR/token"; TOKEN_BASE=$BASE
start_serve demo --demo; DEMO_BASE=$BASE
start_serve rw # (BASE: the read-write server; each one answers /healthz by now)
"$WORKER" -r "$redis_url" -P d web >"$DIR/worker.log" 2>&1 &
PIDS+=("$!")

# a policy that can evict jobs: the overview warns
# the queue page's settings (tests/dashboard/dashboard.mjs, "idle")
"$RJQ" --prefix d schedule idle nightly --cron '0 3 * * *' >/dev/null || { echo "FAIL: rjq schedule"; exit 1; }
"$RJQ" --prefix d limit idle --concurrency 3 --create >/dev/null || { echo "FAIL: rjq limit"; exit 1; }
redis-cli -p "$redis_port" config set maxmemory 1gb >/dev/null
redis-cli -p "$redis_port" config set maxmemory-policy allkeys-lru >/dev/null
cp "$SRC/tests/dashboard/dashboard.mjs" "$PW/dashboard.mjs" # resolves playwright-core from $PW
REDIS_PID=$redis_pid BASE=$BASE RO_BASE=$RO_BASE TOKEN_BASE=$TOKEN_BASE TOKEN=$TOKEN DEMO_BASE=$DEMO_BASE CHROMIUM=$CHROMIUM ART=$ART \
    timeout 120 node "$PW/dashboard.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/rw.err"; }
exit $RC
