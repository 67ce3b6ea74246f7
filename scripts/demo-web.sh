#!/usr/bin/env bash
# The web demo: scripts/demo-web.sh BUILD_DIR [rjq serve options...]
#
# Starts a private redis-server on a free port in a temporary folder
# (nothing saved to disk; with REDIS_URL set, that server instead) and
# `rjq serve --demo` on 127.0.0.1:8080 (DEMO_LISTEN to change it), then
# prints the page's address. The page's demo panel enqueues jobs of a kind
# and sets a worker pool running in the server (size, latency, failure and
# hang rates) and runs reclaim sweeps. Ctrl-C stops both, by pid.
set -u

build=${1:?usage: scripts/demo-web.sh BUILD_DIR [rjq serve options...]}
shift
rjq="$build/rjq"
if ! "$rjq" help 2>/dev/null | grep -q '^  serve '; then
    echo "demo-web.sh: $rjq has no serve command (build first; it needs libjansson-dev)" >&2
    exit 1
fi
# shellcheck source=scripts/redis-private.sh
. "$(dirname "${BASH_SOURCE[0]}")/redis-private.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/rjq-demo-web.XXXXXX")
serve_pid=
cleanup() {
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
    redis_private_stop
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 0' INT TERM
url=${REDIS_URL:-}
if [ -z "$url" ]; then
    redis_private_start "$dir" || { echo "demo-web.sh: could not start redis-server" >&2; exit 1; }
    url=$redis_url
fi
"$rjq" -u "$url" --prefix demo serve --demo --listen "${DEMO_LISTEN:-127.0.0.1:8080}" "$@" >"$dir/out" 2>"$dir/err" &
serve_pid=$!
for _ in $(seq 200); do
    grep -q '^listening on' "$dir/out" 2>/dev/null && break
    kill -0 "$serve_pid" 2>/dev/null || { cat "$dir/err" >&2; exit 1; }
    sleep 0.05
done
addr=$(sed -n 's/^listening on //p' "$dir/out")
echo "rjq demo: open http://$addr/ (Redis: $url). Ctrl-C stops it."
wait "$serve_pid"
