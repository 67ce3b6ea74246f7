# The start every rjq serve test script (tool_serve_*.sh) shares; sourced,
# not a test itself (ctest runs tests/*.sh), right after `set -u`:
#
#   SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
#   # shellcheck source=tests/serve_test.bash
#   . "$SRC/tests/serve_test.bash"
#   serve_test PREFIX NAME [worker] [redis-cli] [browser]
#
# The dashboard tests (dashboard*.sh) start so too, with `browser`.
# shellcheck shell=bash disable=SC2034 # (the scripts that source this read BUILD, RJQ, WORKER, PY, ART)

# serve_test PREFIX NAME [NEED...]: sets BUILD, RJQ, WORKER (the gateway
# worker example) and PY (/usr/bin/python3); says FAIL (exit 1) when rjq,
# curl, python3 or a NEED (worker: WORKER built; redis-cli) is missing, and
# SKIP (exit 77) when rjq was built without serve; with NEED browser,
# tests/browser_setup.bash sets CHROMIUM and PW (playwright-core
# PW_VERSION, installed on first use; SKIP, exit 0, where it cannot be) and
# ART (BUILD/artifacts, the screenshots' folder) is made; sources
# scripts/redis-private.sh and tests/serve_helpers.bash, sets SERVE_PREFIX
# to PREFIX and, unless NAME is "-", calls serve_setup NAME (DIR, PIDS, a
# private redis-server, all stopped and removed on exit); FAILURES and
# CHECKS start at 0. In this shell, never in $(...).
serve_test() {
    local prefix=$1 name=$2 need
    shift 2
    BUILD=${RJQ_BUILD:?RJQ_BUILD must name the build directory}
    RJQ="$BUILD/rjq"
    WORKER="$BUILD/rjq-gateway_worker"
    PY=/usr/bin/python3
    [ -x "$RJQ" ] || { echo "FAIL: $RJQ not built"; exit 1; }
    if "$RJQ" serve --listen x 2>&1 | grep -q "built without"; then
        echo "SKIP: rjq was built without serve (libjansson-dev)"; exit 77
    fi
    for need in "$@"; do
        case $need in
        worker) [ -x "$WORKER" ] || { echo "FAIL: $WORKER not built"; exit 1; } ;;
        redis-cli) command -v redis-cli >/dev/null || { echo "FAIL: redis-cli is needed"; exit 1; } ;;
        browser) ;; # (below)
        *) echo "FAIL: serve_test: unknown need $need"; exit 1 ;;
        esac
    done
    command -v curl >/dev/null || { echo "FAIL: curl is needed (scripts/install-deps.sh)"; exit 1; }
    [ -x "$PY" ] || { echo "FAIL: /usr/bin/python3 is needed (scripts/install-deps.sh)"; exit 1; }
    if [[ " $* " == *" browser "* ]]; then
        PW_VERSION=1.65.1
        # shellcheck source=tests/browser_setup.bash
        . "$SRC/tests/browser_setup.bash"
        ART="$BUILD/artifacts"
        mkdir -p "$ART"
    fi
    # shellcheck source=scripts/redis-private.sh
    . "$SRC/scripts/redis-private.sh"
    # shellcheck source=tests/serve_helpers.bash
    . "$SRC/tests/serve_helpers.bash"
    SERVE_PREFIX=$prefix
    FAILURES=0 CHECKS=0
    [ "$name" = - ] || serve_setup "$name"
}

# fail MESSAGE: one more failure, said; check: one more check.
fail() { FAILURES=$((FAILURES + 1)); echo "FAIL: $*"; }
check() { CHECKS=$((CHECKS + 1)); }
# get CURL-ARGS...: CODE (the status) and BODY of one request.
get() { CODE=$(curl -s -o "$DIR/b" -w '%{http_code}' "$@"); BODY=$(cat "$DIR/b"); }
