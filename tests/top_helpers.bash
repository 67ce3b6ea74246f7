# shellcheck shell=bash
# What tests/tool_top.sh and tests/tool_top_groups.sh share: the failure
# count, reading the screen of rjq top running in session "top" of the
# private tmux server TMUX_CMD (its copy in $DIR/screen), and quitting it.

FAILURES=0
fail() { FAILURES=$((FAILURES + 1)); echo "FAIL: $*"; echo "--- screen:"; cat "$DIR/screen"; }
screen() { "${TMUX_CMD[@]}" capture-pane -p -t top >"$DIR/screen" 2>/dev/null; }
# wait_screen REGEX: until the screen shows a line matching it (at most 20 s:
# a bound for a loaded machine, not a time the check waits for)
wait_screen() {
    for _ in $(seq 200); do
        screen
        grep -qE -- "$1" "$DIR/screen" && return 0
        sleep 0.1
    done
    return 1
}
# quit_top: q, then rjq top's exit code (in $DIR/rc, written by the
# session's command) must be 0 (waited for at most 20 s, as above)
quit_top() {
    "${TMUX_CMD[@]}" send-keys -t top q
    for _ in $(seq 200); do [ -s "$DIR/rc" ] && break; sleep 0.1; done
    [ "$(cat "$DIR/rc" 2>/dev/null)" = 0 ] || fail "q quits with exit 0 (got '$(cat "$DIR/rc" 2>/dev/null)')"
}
