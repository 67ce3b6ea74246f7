# A private redis-server for one script run, shared by scripts/demo.sh and
# the shell tests (tests/demo_valgrind.sh, tests/tool_cli.sh). Source it
# from bash, then:
#
#   redis_private_start DIR   start redis-server on a free port of 127.0.0.1,
#                             daemonized, its files (pid, log) in DIR and
#                             nothing saved to disk; sets redis_pid,
#                             redis_port and redis_url. Retries with another
#                             port if one is taken meanwhile.
#   redis_private_stop        stop that server by its pid: SIGCONT (a test may
#                             have stopped it), SIGTERM, SIGKILL after 10 s.
#                             Never by name. DIR stays; it is the caller's.
#
# Also: redis_free_port (a port nobody listens on), redis_alive PID,
# redis_ping PORT. PING goes over bash's /dev/tcp: redis-cli is not needed.
#
# shellcheck shell=bash disable=SC2034 # the scripts that source this read redis_*

redis_pid=
redis_port=
redis_url=

redis_ping() {
    local reply=
    { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
    printf 'PING\r\n' >&3
    IFS= read -r -t 1 reply <&3
    exec 3<&- 3>&-
    [[ $reply == +PONG* ]]
}

# A port nobody listens on (checked, then bound by redis-server: a race with
# another program is possible, so redis_private_start retries). Picked
# below the kernel's ephemeral range, with its cluster bus port (+ 10000)
# too: a port in that range may be taken at any moment as the local port of
# an outgoing connection (a loaded test run makes thousands), which a
# check for a listener cannot see (a cluster test saw 8 starts in a row
# fail "Failed listening on port", each port or bus port above 32767).
redis_free_port() {
    local port low=32768 base=10000 span
    read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
    span=$((low - 10000 - base))
    [ "$span" -ge 1000 ] || { base=20000; span=40000; } # (an unusual range: as before)
    for _ in $(seq 100); do
        port=$((base + (RANDOM * 32768 + RANDOM) % span))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    return 1
}

# Is pid running? A daemonized redis-server is not our child: once it exits
# it stays a zombie until init reaps it, which can take a while, so a zombie
# counts as gone.
redis_alive() {
    local stat
    kill -0 "$1" 2>/dev/null || return 1
    if [ -r "/proc/$1/stat" ]; then
        stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
        stat=${stat##*) }
        [ "${stat%% *}" != Z ]
    fi
}

redis_private_start() {
    local dir=${1:?usage: redis_private_start DIR} attempt from
    for attempt in 1 2 3 4 5; do
        redis_port=$(redis_free_port) || break
        redis_pid=
        rm -f "$dir/redis.pid"
        # this start's log lines: past what earlier tries wrote
        from=$(($(wc -c 2>/dev/null <"$dir/redis.log" || echo 0) + 1))
        redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$dir" \
            --save '' --appendonly no --daemonize yes \
            --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >/dev/null || continue
        for _ in $(seq 200); do # up to 10 s
            [ -z "$redis_pid" ] && [ -s "$dir/redis.pid" ] && redis_pid=$(cat "$dir/redis.pid")
            # Ours listens once its log says "Server initialized" (its pid
            # file comes before its sockets since Redis 7.2): until then a
            # server answering may be another one given the same port.
            if [ -n "$redis_pid" ] && redis_alive "$redis_pid" &&
                tail -c "+$from" "$dir/redis.log" 2>/dev/null | grep -q "Server initialized" &&
                redis_ping "$redis_port"; then
                redis_url="redis://127.0.0.1:$redis_port"
                return 0
            fi
            if [ -n "$redis_pid" ] && ! redis_alive "$redis_pid"; then break; fi
            sleep 0.05
        done
        echo "${0##*/}: redis-server on port $redis_port did not start (attempt $attempt):" >&2
        tail -n 3 "$dir/redis.log" >&2 2>/dev/null
        # Stop a half-started server before the next attempt.
        [ -z "$redis_pid" ] && [ -s "$dir/redis.pid" ] && redis_pid=$(cat "$dir/redis.pid")
        redis_private_stop
    done
    redis_port=
    return 1
}

redis_private_stop() {
    local pid=$redis_pid
    redis_pid=
    redis_url=
    if [ -n "$pid" ] && redis_alive "$pid"; then
        kill -CONT "$pid" 2>/dev/null # a stopped server would not act on SIGTERM
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 200); do # up to 10 s
            redis_alive "$pid" || break
            sleep 0.05
        done
        if redis_alive "$pid"; then kill -KILL "$pid" 2>/dev/null; fi
    fi
    return 0
}
