#!/usr/bin/env bash
# The dashboard with a sharded queue (README "Sharded queues") in a real
# browser (chromium + playwright-core, as tests/dashboard.sh): the overview
# has one row for the queue, with its shard count, and none for its shards;
# its page shows the per-shard table (name, master, numbers) and the jobs
# enqueued from the page land on the shards; a shard opened on its own
# says which queue it belongs to. Screenshots: <build>/artifacts/.
# Skipped (with the reason) only where chromium or npm cannot be installed.
set -u
BUILD=${RJQ_BUILD:?RJQ_BUILD must name the build directory}
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
RJQ="$BUILD/rjq"
PW_VERSION=1.65.1
"$RJQ" serve --listen x 2>&1 | grep -q "built without" && { echo "SKIP: rjq built without serve"; exit 0; }

apt_install() { # apt_install PKG...: as root, update the lists when the first try fails
    [ "$(id -u)" = 0 ] || return 1
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1 ||
        { apt-get update >/dev/null 2>&1 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1; }
}
CHROMIUM=/usr/lib/chromium/chromium
[ -x "$CHROMIUM" ] || apt_install chromium
[ -x "$CHROMIUM" ] || { echo "SKIP: chromium cannot be installed here (Debian package chromium)"; exit 0; }
command -v npm >/dev/null || apt_install nodejs npm
command -v npm >/dev/null || { echo "SKIP: npm cannot be installed here (Debian packages nodejs, npm)"; exit 0; }
PW="$BUILD/playwright"
if [ ! -f "$PW/node_modules/playwright-core/package.json" ] ||
   ! grep -q "\"version\": \"$PW_VERSION\"" "$PW/node_modules/playwright-core/package.json"; then
    mkdir -p "$PW"
    npm install --prefix "$PW" --no-audit --no-fund --loglevel=error "playwright-core@$PW_VERSION" >"$PW/install.log" 2>&1 ||
        { echo "SKIP: playwright-core cannot be installed from npm: $(tail -3 "$PW/install.log")"; exit 0; }
fi

# shellcheck source=scripts/redis-private.sh
. "$SRC/scripts/redis-private.sh"
# shellcheck source=tests/serve_helpers.bash
. "$SRC/tests/serve_helpers.bash"
SERVE_PREFIX=ds
ART="$BUILD/artifacts"
mkdir -p "$ART"
serve_setup dashboard-shards

"$RJQ" --prefix ds shards hot 3 >/dev/null || { echo "FAIL: rjq shards hot 3"; exit 1; }
"$RJQ" --prefix ds enqueue cold x >/dev/null || { echo "FAIL: rjq enqueue cold"; exit 1; }
start_serve rw
cp "$SRC/tests/dashboard/shards.mjs" "$PW/shards.mjs" # resolves playwright-core from $PW
BASE=$BASE CHROMIUM=$CHROMIUM ART=$ART timeout 120 node "$PW/shards.mjs"
RC=$?
[ "$RC" = 0 ] || { echo "server log:"; tail -20 "$DIR/rw.err"; }
exit $RC
