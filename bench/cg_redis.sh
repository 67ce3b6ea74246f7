# shellcheck shell=bash
# Sourced by the bench scripts that measure redis-server under callgrind
# (callgrind.sh, callgrind_floor.sh, callgrind_drain_floor.sh, callgrind_await_floor.sh,
# callgrind_group_floor.sh, callgrind_deps_floor.sh,
# callgrind_lean.sh, deps_callgrind.sh, deps_replay.sh, turnq_proto.sh): one place for
# starting it, stopping it on exit and reading a dump's instructions.

# Start redis-server on port $1 under callgrind, its files in $OUT; its pid
# in CG_REDIS_PID; stopped when the script exits; returns once it answers.
# $2 names the calling script in the message if it dies first; any further
# arguments are valgrind options (e.g. --toggle-collect=fcallCommand).
cg_redis_start() {
  valgrind --tool=callgrind "${@:3}" --callgrind-out-file="$OUT/redis.%p.cg" \
    redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no --dir "$OUT" \
    > "$OUT/redis.log" 2>&1 &
  CG_REDIS_PID=$!
  trap cg_redis_stop EXIT
  until redis-cli -p "$1" ping > /dev/null 2>&1; do
    kill -0 "$CG_REDIS_PID" 2> /dev/null || { echo "$2: redis-server died: $OUT/redis.log" >&2; exit 1; }
    sleep 0.2
  done
}
cg_redis_stop() { kill "$CG_REDIS_PID" 2> /dev/null || true; wait "$CG_REDIS_PID" 2> /dev/null || true; }

# The instructions of the dump tagged $1 (its "totals:" line).
cg_dumped() {
  local f
  # (CG_REDIS_PID unquoted: "*" matches the files of any pid)
  f=$(grep -l "^desc: Trigger: dump $1\$" "$OUT"/redis.$CG_REDIS_PID.cg.* 2> /dev/null | tail -1)
  [ -n "$f" ] || f=$(ls -t "$OUT"/redis.$CG_REDIS_PID.cg.* | head -1)
  awk '/^(totals|summary):/ { print $2; exit }' "$f"
}
