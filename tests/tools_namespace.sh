#!/usr/bin/env bash
# Only the library defines names in rjq_ (issue 37, "ABI and API"): a
# function of the tools (tools/: rjq, rjq serve, rjq top, the PostgreSQL
# bridge) defined or declared as rjq_... would read as the library's API.
# Fails on one (a line starting with a type and naming rjq_<name>( ), and
# proves on a planted one that the check sees it.
set -euo pipefail
src=${RJQ_SOURCE:?RJQ_SOURCE must name the source folder}
defs() { grep -rnE '^[A-Za-z_][A-Za-z0-9_ *]*[ *]rjq_[a-z0-9_]*\(' "$@" --include=*.c --include=*.h || true; }
bad=$(defs "$src/tools")
if [ -n "$bad" ]; then
    echo "FAIL: tools/ defines functions in the library's rjq_ namespace (name them for their tool):"
    echo "$bad"
    exit 1
fi
t=$(mktemp -d "${TMPDIR:-/tmp}/rjq-ns.XXXXXX")
trap 'rm -rf "$t"' EXIT
printf 'static int helper(void);\nint rjq_planted(struct event_base *base,\n                int x) {\n    return rjq_client_new(0, 0, 0, 0);\n}\n' >"$t/planted.c"
[ "$(defs "$t" | wc -l)" = 1 ] || { echo "FAIL: the check does not see a planted rjq_planted()"; exit 1; }
echo "ok: no rjq_ function in tools/"
