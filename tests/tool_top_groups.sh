#!/usr/bin/env bash
# rjq top and job groups (README "Groups"), driven in a private tmux server
# as tests/tool_top.sh: the picked queue's busiest groups (most ready jobs
# first, at most 5) with their running jobs, limits and PAUSED, followed as
# they change; a queue without groups shows no such line; a sharded queue's
# groups are its shards' merged; a group starting jobs shows its starts/s.
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
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rjq-top-groups.XXXXXX") || die "mktemp failed"
TMUX_CMD=(tmux -S "$DIR/tmux.sock")
worker_pid=
cleanup() {
    [ -n "$worker_pid" ] && kill -KILL "$worker_pid" 2>/dev/null # (our own worker, by its pid)
    "${TMUX_CMD[@]}" kill-server 2>/dev/null # our private tmux server only
    redis_private_stop
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
redis_private_start "$DIR" || die "could not start redis-server"
export RJQ_URL=$redis_url

# shellcheck source=tests/top_helpers.bash
. "$(dirname "${BASH_SOURCE[0]}")/top_helpers.bash"
enq() { # enq QUEUE GROUP N
    for i in $(seq "$3"); do "$RJQ_BIN" enqueue "$1" "$2-$i" --group "$2" >/dev/null || die "enqueue"; done
}

# 7 groups of a-tenants (the first row, picked): 5 are shown, deepest first
enq a-tenants big 6; enq a-tenants t1 5; enq a-tenants t2 4; enq a-tenants t3 3
enq a-tenants t4 2; enq a-tenants t5 1; enq a-tenants t6 1
"$RJQ_BIN" enqueue b-plain x >/dev/null || die "enqueue"
# c-sharded: a sharded queue (2 shards), its groups on both (crc16(group)
# mod 2: s1 and s3 on c-sharded~0-0, s2 and s4 on c-sharded~1-0)
"$RJQ_BIN" shards c-sharded 2 >/dev/null || die "shards"
enq c-sharded s1 4; enq c-sharded s2 3; enq c-sharded s3 2; enq c-sharded s4 1
[ "$("$RJQ_BIN" groups 'c-sharded~1-0' | head -1)" = "groups 2" ] || die "c-sharded's groups on both shards"

"${TMUX_CMD[@]}" new-session -d -s top -x 200 -y 24 \
    "RJQ_URL=$RJQ_URL '$RJQ_BIN' top --interval 300; echo \$? >'$DIR/rc'; sleep 5"
wait_screen '^a-tenants +22 ' || fail "a-tenants with its 22 group jobs ready"
wait_screen '^  busiest groups \(7 with jobs\): big ready 6 active 0, t1 ready 5 active 0, t2 ready 4 active 0, t3 ready 3 active 0, t4 ready 2 active 0$' ||
    fail "the picked queue's 5 busiest groups"
# followed: t6 grows to the top and is paused
enq a-tenants t6 9
"$RJQ_BIN" group a-tenants t6 --pause >/dev/null || die "rjq group --pause"
wait_screen '^  busiest groups \(7 with jobs\): t6 ready 10 active 0 PAUSED, big ready 6 active 0,' ||
    fail "t6, grown and paused, first"
# a queue without groups: no groups line
"${TMUX_CMD[@]}" send-keys -t top Down
wait_screen '^b-plain: enqueued 1' || fail "down picks b-plain"
# (a refresh after the pick: its groups' read is sent before its stats')
"$RJQ_BIN" enqueue b-plain y >/dev/null || die "enqueue"
wait_screen '^b-plain: enqueued 2' || fail "b-plain's second job seen"
grep -q 'busiest groups' "$DIR/screen" && fail "b-plain shows a groups line"
"${TMUX_CMD[@]}" send-keys -t top Up
wait_screen '^  busiest groups \(7 with jobs\): t6 ready 10' || fail "up: a-tenants' groups again"
# its groups' limits, compactly: a bound as "ready N/BOUND", a concurrency
# as "active N/LIMIT", a rate limit as "rate 50/1s" (as rjq groups prints
# it); a group without them as before; and the queue's own limits line
# with its rate in the same form
"$RJQ_BIN" group a-tenants big --concurrency 2 --rate 50 --max-waiting 500 >/dev/null || die "rjq group"
"$RJQ_BIN" group a-tenants t1 --rate 3/250 >/dev/null || die "rjq group"
"$RJQ_BIN" limit a-tenants --concurrency 4 --rate 50/2000 >/dev/null || die "rjq limit"
wait_screen '^  busiest groups \(7 with jobs\): t6 ready 10 active 0 PAUSED, big ready 6/500 active 0/2 rate 50/1s, t1 ready 5 active 0 rate 3/250ms, t2 ready 4 active 0, t3 ready 3 active 0$' ||
    fail "the busiest groups' limits"
wait_screen '^  limits: concurrency 4, rate 50/2s; running' || fail "the queue's limits, its rate as 50/2s"
# a sharded queue (one row): its shards' groups merged, each once; a group
# paused on its shard shows PAUSED
"$RJQ_BIN" group c-sharded s2 --pause >/dev/null || die "rjq group --pause"
"${TMUX_CMD[@]}" send-keys -t top Down Down
wait_screen '^c-sharded: enqueued 10' || fail "down down picks c-sharded"
wait_screen '^  busiest groups \(4 with jobs\): s1 ready 4 active 0, s2 ready 3 active 0 PAUSED, s3 ready 2 active 0, s4 ready 1 active 0$' ||
    fail "c-sharded's groups, merged over its shards"
# d-runs (a queue of its own, the next row): a group whose jobs start shows
# its starts/s, from two readings of its started counter
# (rjq_group_info.started), while it starts jobs
WORKER="$BUILD/rjq-gateway_worker"
[ -x "$WORKER" ] || die "$WORKER is not built"
"$RJQ_BIN" group d-runs runs --concurrency 1 >/dev/null || die "rjq group"
for i in $(seq 40); do "$RJQ_BIN" enqueue d-runs "sleep:100:$i" --group runs >/dev/null || die "enqueue"; done
"${TMUX_CMD[@]}" send-keys -t top Down
wait_screen '^d-runs: enqueued 40' || fail "down picks d-runs"
REDIS_URL=$RJQ_URL "$WORKER" -c 2 d-runs >"$DIR/worker.log" 2>&1 &
worker_pid=$!
wait_screen '^  busiest groups \(1 with jobs\): runs ready [0-9]+ active [01]/1 [0-9]+\.[0-9] starts/s$' ||
    fail "the running group's starts/s"
kill -TERM "$worker_pid" 2>/dev/null
wait "$worker_pid" 2>/dev/null
worker_pid=
quit_top

echo "tool_top_groups: $FAILURES failed"
[ "$FAILURES" -eq 0 ]
