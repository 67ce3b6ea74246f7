# shellcheck shell=bash
# Sourced by the bench scripts that measure redis-server under callgrind
# (callgrind.sh, callgrind_floor.sh, callgrind_drain_floor.sh, callgrind_await_floor.sh,
# callgrind_group_floor.sh, callgrind_deps_floor.sh,
# callgrind_lean.sh, deps_callgrind.sh, deps_replay.sh, turnq_proto.sh): one place for
# starting it, stopping it on exit, reading a dump's instructions, the idle
# server's rate, and the drain stand-ins' rows. It puts bench/ on PYTHONPATH:
# the scripts' Python drivers import their RESP client from bench/cg_resp.py.

CG_BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONPATH="$CG_BENCH_DIR${PYTHONPATH:+:$PYTHONPATH}"

# Start redis-server on port $1 under callgrind, its files in $OUT; its pid
# in CG_REDIS_PID; stopped when the script exits; returns once it answers.
# $2 names the calling script in the message if it dies first; any further
# arguments are valgrind options (e.g. --toggle-collect=fcallCommand).
# Refused when something already answers on port $1 (another engineer's
# server: the scripts FLUSHALL theirs and would measure that one).
cg_redis_start() {
  if redis-cli -p "$1" ping > /dev/null 2>&1; then
    echo "$2: port $1 is taken (something answers there): set CG_PORT to a free one" >&2
    exit 1
  fi
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

# Now, in seconds (for the windows the idle rate is taken over).
cg_now() { date +%s.%N; }

# The idle server's rate (its cron, valgrind's clock) in instructions a second,
# over $1 seconds of nothing: the scripts subtract it times a
# measured window's length. Needs the server started by cg_redis_start.
cg_idle_rate() {
  local t0 t1
  callgrind_control -z "$CG_REDIS_PID" > /dev/null 2>&1
  t0=$(cg_now)
  sleep "$1"
  callgrind_control --dump=idle "$CG_REDIS_PID" > /dev/null 2>&1
  t1=$(cg_now)
  awk -v i="$(cg_dumped idle)" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", i / (b - a) }'
}

# The drain stand-ins' rows (callgrind_drain_floor.sh, callgrind_group_floor.sh):
# for case $1, "| case | instr/job | of which the claim | the completion |",
# each per job in thousands: $OUT/drive.py fills the server unmeasured
# ("fill"), then runs claims and completions ("run") or claims alone
# ("claim") measured, less the idle rate $idle over the window. drive.py's
# arguments: port, DRAIN_N, BATCH, the case, the phase, then $2... (PY, OUT,
# CG_PORT, DRAIN_N, BATCH and idle: the calling script's).
cg_drain_row() {
  local all cl
  all=$(cg_drain_measure "$1" run "${@:2}")
  cl=$(cg_drain_measure "$1" claim "${@:2}")
  printf "| %-6s | %8.1fk | %8.1fk | %8.1fk |\n" "$1" "$all" "$cl" "$(awk -v a="$all" -v b="$cl" 'BEGIN { print a - b }')"
}
cg_drain_measure() {
  local c=$1 ph=$2 a b ir
  $PY "$OUT/drive.py" "$CG_PORT" "$DRAIN_N" "$BATCH" "$c" fill "${@:3}"
  callgrind_control -z "$CG_REDIS_PID" > /dev/null 2>&1
  a=$(cg_now)
  $PY "$OUT/drive.py" "$CG_PORT" "$DRAIN_N" "$BATCH" "$c" "$ph" "${@:3}" > "$OUT/$c-$ph.out"
  callgrind_control --dump="$c-$ph" "$CG_REDIS_PID" > /dev/null 2>&1
  b=$(cg_now)
  ir=$(cg_dumped "$c-$ph")
  # shellcheck disable=SC2154 # (idle: the calling script's, from cg_idle_rate)
  awk -v i="$ir" -v r="$idle" -v a="$a" -v b="$b" -v n="$DRAIN_N" 'BEGIN { printf "%.1f", (i - r * (b - a)) / n / 1000 }'
}
