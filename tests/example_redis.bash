# Sourced by the scripts that run an example against a private
# redis-server (traces_example.sh, poll_example_valgrind.sh,
# demo_valgrind.sh): example_redis_start NAME makes a temp folder ($dir,
# removed on exit), starts redis-server there (stopped by its pid on
# exit, on INT and on TERM) and exports REDIS_URL.
# shellcheck source=scripts/redis-private.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/redis-private.sh"

example_redis_start() {
    dir=$(mktemp -d "${TMPDIR:-/tmp}/rjq-$1.XXXXXX") || exit 1
    trap 'redis_private_stop; rm -rf "$dir"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    redis_private_start "$dir" || { echo "FAIL: could not start redis-server" >&2; exit 1; }
    export REDIS_URL=$redis_url
}
