#!/usr/bin/env bash
# The Redis cost of dependencies (bench/README.md "Dependencies"): runs
# build/deps-bench against a private redis-server, each mode on an empty
# database, and prints the server's CPU (INFO cpu, user + sys) and the
# time its commands took (INFO commandstats, scripts' inner commands in
# their FCALL/EVALSHA) per job.
#   bench/deps.sh [BUILD] [N]      (defaults: build, 20000)
set -euo pipefail
build=${1:-build}
n=${2:-20000}
port=$(( 20000 + RANDOM % 20000 ))
dir=$(mktemp -d)
redis-server --port "$port" --save '' --appendonly no --dir "$dir" --daemonize no >"$dir/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
cpu() { redis-cli -p "$port" info cpu | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.6f", s}'; }
usec() { redis-cli -p "$port" info commandstats | awk -F'usec=' '/^cmdstat_/ && !/cmdstat_info:/ {split($2, a, ","); s += a[1]} END {print s}'; }
run() { # mode n jobs
    redis-cli -p "$port" flushall >/dev/null
    redis-cli -p "$port" config resetstat >/dev/null
    local c0 u0 c1 u1
    c0=$(cpu); u0=$(usec)
    REDIS_URL="redis://127.0.0.1:$port" "$build/deps-bench" "$1" "$2"
    c1=$(cpu); u1=$(usec)
    awk -v m="$1" -v c="$(echo "$c1 - $c0" | bc)" -v u="$((u1 - u0))" -v j="$3" \
        'BEGIN {printf "%s: %d jobs, Redis CPU %.2f us/job, command time %.2f us/job\n", m, j, c * 1e6 / j, u / j}'
}
run plain "$n" "$n"
run single "$n" "$((2 * n))"
run dep "$n" "$((2 * n))"
run same "$n" "$((2 * n))"
run fanin 10000 10101
