#!/usr/bin/env bash
# Run the rjq demo: scripts/demo.sh BUILD_DIR [rjq-demo options...]
#
# With REDIS_URL set, the demo runs against that server. Otherwise a private
# redis-server is started on a free port in a temporary folder (nothing is
# saved to disk) and stopped again, by its pid, when this script exits.
# Exits with the demo's status.
set -u

build=${1:?usage: scripts/demo.sh BUILD_DIR [rjq-demo options...]}
shift
demo="$build/rjq-demo"
if [ ! -x "$demo" ]; then
    echo "demo.sh: $demo not found; build first (make build)" >&2
    exit 1
fi

# shellcheck source=scripts/redis-private.sh
. "$(dirname "${BASH_SOURCE[0]}")/redis-private.sh"

redis_dir=

cleanup() {
    redis_private_stop
    if [ -n "$redis_dir" ]; then rm -rf "$redis_dir"; fi
}

if [ -z "${REDIS_URL:-}" ]; then
    if ! command -v redis-server >/dev/null; then
        echo "demo.sh: redis-server not found (install it, or set REDIS_URL)" >&2
        exit 1
    fi
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    redis_dir=$(mktemp -d "${TMPDIR:-/tmp}/rjq-demo-redis.XXXXXX") || exit 1
    if ! redis_private_start "$redis_dir"; then
        echo "demo.sh: could not start redis-server" >&2
        exit 1
    fi
    export REDIS_URL=$redis_url
    echo "demo.sh: private redis-server (pid $redis_pid) at $REDIS_URL"
fi

"$demo" "$@"
