# bash completion for rjq: commands, options, and queue names (from
# `rjq queues`, run quietly with the connection options already typed).
# Installed as share/bash-completion/completions/rjq; or source this file.

_rjq_commands="queues processes top cluster stats shards metrics enqueue job jobs dead delete purge replay
reclaim pause resume queue-format cancel batch batches limit groups group index find schedule unschedule schedules scheduler serve acl version
help"
_rjq_global_options="-u --url -h -p -a --pass --user -n --prefix -t --tls --cacert --cacertdir
--cacert-dir --cert --key --sni --insecure --json --help --version"
# the options before the command that take a value
_rjq_global_values=" -u --url -h -p -a --pass --user -n --prefix -t --cacert --cacertdir
--cacert-dir --cert --key --sni "
# the command options that take a value
_rjq_command_values=" --after --limit --offset --interval --id --delay --priority --attempts
--timeout --dedup --group --weight --concurrency --rate --every --cron --utc-offset --payload --catchup --missed
--lease --listen --queues --token-file --max-body --wait-max --max-queues --max-requests
--max-waiting --request-timeout --queue-idle --role --log-format --on-complete --on-success --add
--job-id --await --state --retention --after-policy --metrics-groups "

# (one line each, so that a match on " $word " finds the names at line ends)
_rjq_global_values=${_rjq_global_values//$'\n'/ }
_rjq_command_values=${_rjq_command_values//$'\n'/ }

# A command's options (every command takes --json and --help).
_rjq_command_options() {
    case $1 in
    queues) echo --after --limit ;;
    processes | jobs | dead) echo --offset --limit ;;
    top | cluster) echo --interval ;;
    enqueue) echo --id --delay --priority --attempts --timeout --dedup --debounce --after --after-policy --group ;;
    groups) echo --limit ;;
    group) echo --concurrency --weight --rate --max-waiting --pause --resume ;;
    purge) echo --yes ;;
    replay) echo --all --limit ;;
    pause | resume | queue-format) echo --create ;;
    stats) echo --shards ;;
    limit) echo --concurrency --rate --create ;;
    index) echo --drop --no-fill --create ;;
    find) echo --limit ;;
    batches) echo --state --limit ;;
    batch) echo --create --id --on-complete --on-success --retention --add --payload --job-id --seal --await --delete --force ;;
    schedule)
        echo --every --cron --utc-offset --payload --catchup --missed --priority --attempts \
            --timeout
        ;;
    scheduler) echo --lease ;;
    serve)
        echo --listen --queues --read-only --token-file --max-body --wait-max --max-queues \
            --max-requests --max-waiting --request-timeout --queue-idle --demo --log-format \
            --access-log --metrics-shards --metrics-groups
        ;;
    acl) echo --queues --role ;;
    esac
    echo --json --help
}

# A word as typed, without the quotes around it.
_rjq_unquote() {
    local w=$1
    if [[ $w == \'*\' || $w == \"*\" ]]; then w=${w:1:${#w}-2}; fi
    printf '%s' "$w"
}

_rjq() {
    local -a words conn
    # the words as typed (COMP_WORDS splits URLs at ':' and '=')
    if [[ -n ${COMP_LINE+set} ]]; then
        local line=${COMP_LINE:0:${COMP_POINT:-${#COMP_LINE}}}
        read -ra words <<<"$line"
        if [[ -z $line || $line == *[[:space:]] ]]; then words+=(""); fi
    else
        words=("${COMP_WORDS[@]:0:COMP_CWORD+1}")
    fi
    local n=${#words[@]} cur=${words[${#words[@]}-1]} prev=""
    ((n > 1)) && prev=${words[n - 2]}
    local i=1 cmd="" npos=0 ended=0 w
    while ((i < n - 1)); do
        w=${words[i]}
        if [[ -z $cmd ]]; then
            case $w in
            -t) ((i++)) ;;
            -u | --url | -h | -p | -a | --pass | --user | -n | --prefix | --cacert | --cacertdir | \
                --cacert-dir | --cert | --key | --sni)
                conn+=("$w" "$(_rjq_unquote "${words[i + 1]}")")
                ((i++))
                ;;
            -t* | --json | --help | --version) ;;
            --tls | --insecure | --*=* | -[uhpan]?*) conn+=("$(_rjq_unquote "$w")") ;;
            -*) ;;
            *) cmd=$w ;;
            esac
        elif ((ended)); then
            ((npos++))
        else
            case $w in
            --) ended=1 ;;
            --*=*) ;;
            --*) [[ $_rjq_command_values == *" $w "* ]] && ((i++)) ;;
            *) ((npos++)) ;;
            esac
        fi
        ((i++))
    done

    local -a reply=()
    if [[ -z $cmd && $_rjq_global_values == *" $prev "* ]] ||
        [[ -n $cmd && $_rjq_command_values == *" $prev "* ]]; then
        case $prev in
        --cacert | --cert | --key | --token-file)
            compopt -o filenames 2>/dev/null
            mapfile -t reply < <(compgen -f -- "$cur")
            ;;
        --cacertdir | --cacert-dir)
            compopt -o filenames 2>/dev/null
            mapfile -t reply < <(compgen -d -- "$cur")
            ;;
        --role) mapfile -t reply < <(compgen -W "producer worker monitor bridge" -- "$cur") ;;
        --missed) mapfile -t reply < <(compgen -W "skip once" -- "$cur") ;;
        --log-format) mapfile -t reply < <(compgen -W "text json" -- "$cur") ;;
        --after-policy) mapfile -t reply < <(compgen -W "fail run ignore" -- "$cur") ;;
        --state) mapfile -t reply < <(compgen -W "pending completed dead" -- "$cur") ;; # (batches)
        esac
    elif [[ $cur == -* && $ended == 0 ]]; then
        if [[ -z $cmd ]]; then
            mapfile -t reply < <(compgen -W "$_rjq_global_options" -- "$cur")
        else
            mapfile -t reply < <(compgen -W "$(_rjq_command_options "$cmd")" -- "$cur")
        fi
    elif [[ -z $cmd ]]; then
        mapfile -t reply < <(compgen -W "$_rjq_commands" -- "$cur")
    else
        local what=""
        case $cmd in
        help) ((npos == 0)) && what=commands ;;
        metrics) what=queues ;;
        stats | shards | enqueue | job | jobs | dead | delete | purge | replay | reclaim | pause | resume | queue-format | \
            cancel | batch | batches | limit | index | find | schedule | unschedule | schedules | scheduler)
            ((npos == 0)) && what=queues
            [[ $cmd == jobs && $npos == 1 ]] && what="ready delayed active dead cancelled completed waiting"
            [[ $cmd == purge && $npos == 1 ]] && what="dead cancelled"
            ;;
        esac
        case $what in
        "") ;;
        commands) mapfile -t reply < <(compgen -W "$_rjq_commands" -- "$cur") ;;
        queues)
            local q
            while IFS= read -r q; do
                [[ $q == "$cur"* ]] && reply+=("$q")
            done < <("${words[0]}" "${conn[@]}" -t 2 queues 2>/dev/null </dev/null)
            ;;
        *) mapfile -t reply < <(compgen -W "$what" -- "$cur") ;;
        esac
    fi
    # bash replaces only its own current word, which starts after a ':' or '='
    local bashcur=${COMP_WORDS[COMP_CWORD]-$cur} pre=""
    [[ $cur == *"$bashcur" ]] && pre=${cur%"$bashcur"}
    COMPREPLY=()
    for w in "${reply[@]}"; do COMPREPLY+=("${w#"$pre"}"); done
}
complete -F _rjq rjq
