#!/usr/bin/env bash
# rjq top, driven in a private tmux server (send-keys, capture-pane) against
# a private redis-server: the queues of the registry with their numbers,
# refreshed as they change, wait and run times from the event stream, a
# queue picked with the arrow keys, q to quit.
#
# Env: RJQ_BUILD (build dir holding the rjq binary).
set -u

BUILD=${RJQ_BUILD:?RJQ_BUILD must name the build directory}
RJQ_BIN="$BUILD/rjq"
die() { echo "FATAL: $*" >&2; exit 1; }
[ -x "$RJQ_BIN" ] || die "$RJQ_BIN is not built"
command -v tmux >/dev/null || die "tmux not found (scripts/install-deps.sh installs it)"
"$RJQ_BIN" help | grep -q "^  top " || die "this rjq has no top (built without ncursesw)"

# shellcheck source=scripts/redis-private.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/redis-private.sh"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rjq-top-test.XXXXXX") || die "mktemp failed"
TMUX_CMD=(tmux -S "$DIR/tmux.sock")
worker_pid=
cleanup() {
    "${TMUX_CMD[@]}" kill-server 2>/dev/null # our private tmux server only
    if [ -n "$worker_pid" ]; then # (while Redis is up: it stops at once)
        kill -TERM "$worker_pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$worker_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$worker_pid" 2>/dev/null
    fi
    redis_private_stop
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 1' INT TERM # (killed by a timeout: the private tmux server goes too)
redis_private_start "$DIR" || die "could not start redis-server"
export RJQ_URL=$redis_url

# shellcheck source=tests/top_helpers.bash
. "$(dirname "${BASH_SOURCE[0]}")/top_helpers.bash"

alpha_one=$("$RJQ_BIN" enqueue alpha one) || die "enqueue"
for p in one two; do "$RJQ_BIN" enqueue beta "$p" >/dev/null || die "enqueue"; done
"$RJQ_BIN" stats looked-at >/dev/null 2>&1 # only looked at: not a queue of the view
# a registry entry no queue can have (written by someone else): not shown
redis-cli -p "$redis_port" ZADD rjq:queues 0 "$(printf 'L%.0s' $(seq 250))" >/dev/null

# not a terminal: it says so, exit 2
"$RJQ_BIN" top </dev/null >"$DIR/out" 2>"$DIR/err"
[ $? -eq 2 ] && grep -q "needs a terminal" "$DIR/err" || { echo "--- err:"; cat "$DIR/err"; fail "top without a terminal"; }

"${TMUX_CMD[@]}" new-session -d -s top -x 150 -y 24 \
    "RJQ_URL=$RJQ_URL '$RJQ_BIN' top --interval 300; echo \$? >'$DIR/rc'; sleep 5"
wait_screen '^alpha +1 +0 +0 +0 +0 ' || fail "alpha with 1 ready"
wait_screen '^beta +2 +0 +0 +0 +0 ' || fail "beta with 2 ready"
grep -q "looked-at" "$DIR/screen" && fail "a queue only looked at is listed"
grep -q "2 queues" "$DIR/screen" || fail "the header counts 2 queues"
# numbers follow the queues
for p in a b c; do "$RJQ_BIN" enqueue alpha "$p" >/dev/null; done
wait_screen '^alpha +4 ' || fail "alpha's 3 new jobs seen"
"$RJQ_BIN" pause alpha >/dev/null
wait_screen '^alpha .*PAUSED' || fail "alpha paused"
# a new queue appears
"$RJQ_BIN" enqueue gamma x >/dev/null
wait_screen '^gamma +1 ' || fail "gamma appears"
wait_screen "3 queues" || fail "the header counts 3 queues"
# a job waiting for its dependency (alpha's first job: paused, never run)
# counts in the WAITING column, between DELAYED and ACTIVE
grep -qE '^QUEUE +READY +DELAYED +WAITING +ACTIVE +DEAD +DONE ' "$DIR/screen" ||
    fail "the header names the WAITING column"
"$RJQ_BIN" enqueue waits x --after "alpha:$alpha_one" >/dev/null || die "enqueue --after"
wait_screen '^waits +0 +0 +1 +0 +0 +0 ' || fail "waits with 1 waiting job"
grep -qE '^alpha +4 +0 +0 +0 +0 +0 ' "$DIR/screen" || fail "alpha: no job waiting"
# the totals line adds the queues up: 7 ready (alpha 4, beta 2, gamma 1), 1 waiting
wait_screen '^\(all queues\) +7 +0 +1 +0 +0 +0 ' || fail "the totals: 7 ready, 1 waiting"
# pick: the first row is alpha; down picks beta, whose numbers show below
wait_screen '^alpha: enqueued 4' || fail "alpha picked first"
"${TMUX_CMD[@]}" send-keys -t top Down
wait_screen '^beta: enqueued 2, completed 0' || fail "down picks beta"
# wait and run times from the event stream: jobs of 150 ms run by a worker
WORKER="$BUILD/rjq-gateway_worker"
if [ -x "$WORKER" ]; then
    REDIS_URL=$RJQ_URL "$WORKER" -c 4 timed >"$DIR/worker.log" 2>&1 &
    worker_pid=$!
    # (the jobs after top watches the queue: its worker makes it known)
    wait_screen '^timed +0 ' || fail "timed appears with its worker"
    for _ in $(seq 50); do # top watches timed's events: it sees the jobs start and end
        [ "$(redis-cli -p "$redis_port" PUBSUB NUMSUB 'rjq:{timed}:events' | tail -1)" -ge 1 ] && break
        sleep 0.1
    done
    for p in a b c; do "$RJQ_BIN" enqueue timed "sleep:150:$p" >/dev/null; done
    wait_screen '^timed +0 +0 +0 +0 +0 +3 ' || fail "timed's 3 jobs done"
    # the columns keep the mean of the last jobs seen: wait a few ms, run ~150
    # (the run time is a difference of whole-ms event stamps: 150 ms can show as 149)
    awk '$1 == "timed" && $12 + 0 >= 140 && $12 + 0 < 1000 && $11 ~ /^[0-9.]+$/ { ok = 1 }
         END { exit !ok }' "$DIR/screen" || fail "timed's WAIT and RUN ms columns"
    "${TMUX_CMD[@]}" send-keys -t top Down Down
    wait_screen '^timed: enqueued 3' || fail "down down picks timed"
    wait_screen 'wait p50 <=[0-9.]+m?s p99 <=[0-9.]+m?s \(3 jobs\), run p50 <=(250|500)ms p99 <=(250|500)ms \(3 runs\)' ||
        fail "timed's wait and run quantiles"
    # the last minutes from the stored history (every process's counts):
    # 3 enqueued (by rjq enqueue), 3 completed (by the worker), each run at
    # least its 150 ms sleep (how much longer is the machine's load: no bound)
    wait_screen 'last 5 min \(stored, every process\): enqueued 3, completed 3, failed 0; wait p50 [0-9.]+ p99 [0-9.]+ ms, run p50 [0-9]{3,}(\.[0-9]+)? p99 [0-9]{3,}(\.[0-9]+)? ms' ||
        fail "timed's stored history"
    kill -TERM "$worker_pid" 2>/dev/null
    wait "$worker_pid" 2>/dev/null
    worker_pid=
else
    fail "$WORKER is not built"
fi
# a sharded queue is one row, its shards' numbers summed; the shards are not listed
"$RJQ_BIN" shards sh 3 >/dev/null || die "shards"
for id in a b c d; do "$RJQ_BIN" enqueue sh x --id "$id" >/dev/null || die "enqueue"; done
wait_screen '^sh +4 +0 +0 +0 +0 ' || fail "the sharded queue sh with its 4 jobs, summed"
grep -q '^sh~' "$DIR/screen" && fail "a shard listed as a queue"
wait_screen "6 queues" || fail "the header counts sh once (alpha, beta, gamma, waits, timed, sh)"
# a sharded queue's wait and run times: a monitor per shard, its jobs timed
# per shard and shown in its row as a plain queue's
if [ -x "$WORKER" ]; then
    "$RJQ_BIN" shards shtimed 3 >/dev/null || die "shards"
    REDIS_URL=$RJQ_URL "$WORKER" -c 4 shtimed >"$DIR/worker2.log" 2>&1 &
    worker_pid=$!
    wait_screen '^shtimed +0 ' || fail "shtimed appears with its worker"
    for _ in $(seq 50); do # top watches each shard's events
        [ "$(redis-cli -p "$redis_port" PUBSUB CHANNELS 'rjq:{shtimed~*}:events' | wc -l)" -ge 3 ] &&
            [ "$(redis-cli -p "$redis_port" PUBSUB NUMSUB $(redis-cli -p "$redis_port" PUBSUB CHANNELS 'rjq:{shtimed~*}:events') |
                awk 'NR % 2 == 0 && $1 >= 1' | wc -l)" -ge 3 ] && break
        sleep 0.1
    done
    for id in a b c; do "$RJQ_BIN" enqueue shtimed "sleep:150:$id" --id "t-$id" >/dev/null; done
    wait_screen '^shtimed +0 +0 +0 +0 +0 +3 ' || fail "shtimed's 3 jobs done"
    awk '$1 == "shtimed" && $12 + 0 >= 140 && $12 + 0 < 1000 && $11 ~ /^[0-9.]+$/ { ok = 1 }
         END { exit !ok }' "$DIR/screen" || fail "shtimed's WAIT and RUN ms columns"
    # (rows by name: shtimed is the row above timed, picked)
    "${TMUX_CMD[@]}" send-keys -t top Up
    wait_screen '^shtimed: enqueued 3' || fail "up picks shtimed"
    wait_screen 'wait p50 <=[0-9.]+m?s p99 <=[0-9.]+m?s \(3 jobs\), run p50 <=(250|500)ms p99 <=(250|500)ms \(3 runs\)' ||
        fail "shtimed's wait and run quantiles"
    kill -TERM "$worker_pid" 2>/dev/null
    wait "$worker_pid" 2>/dev/null
    worker_pid=
fi
quit_top

echo "tool_top: $FAILURES failed"
[ "$FAILURES" -eq 0 ]
