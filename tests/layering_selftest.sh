#!/usr/bin/env bash
# tests/layering.sh bites: on a copy of src/ and of its objects it passes,
# and each planted violation fails it with a message naming the culprit:
# a cycle, a call up, a file in no layer, a file without an object, a
# placed file gone, an include up, a feature reaching core_private.h
# (directly or through a header), a core file outside the request layer
# including request_private.h, a feature outside the worker layer
# including worker_private.h, an include of an unknown header.
# Violations of the linker graph are planted by linking (ld -r) a tiny
# object into a copy of a real one; the symbols used are read from the
# objects, so the test follows the code.
#
# Env: RJQ_BUILD (a built folder), RJQ_SOURCE (the source tree).
set -u
BUILD=${RJQ_BUILD:?RJQ_BUILD must name a build folder}
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source tree}
OBJS=$BUILD/CMakeFiles/rjq_obj.dir/src
CC=${CC:-cc}
FAILURES=0

T=$(mktemp -d "${TMPDIR:-/tmp}/rjq-layering-selftest.XXXXXX") || exit 1
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
fake_src=$T/source/src
fake_objs=$T/build/CMakeFiles/rjq_obj.dir/src

# A fresh copy of the sources and objects.
reset() {
    rm -rf "$T/source" "$T/build"
    mkdir -p "$fake_src" "$fake_objs"
    cp "$SRC"/src/*.c "$SRC"/src/*.h "$fake_src"/
    ln -s "$OBJS"/*.c.o "$fake_objs"/  # replaced, never written through
}

# check NAME: runs the script on the copy; RC and $T/out
check() {
    RJQ_BUILD=$T/build RJQ_SOURCE=$T/source bash "$SRC/tests/layering.sh" > "$T/out" 2>&1
    RC=$?
}

fail() {
    FAILURES=$((FAILURES + 1))
    echo "FAIL: $*"
    echo "--- layering.sh said:"
    cat "$T/out"
}

# expect CASE TEXT...: the check failed, and said each TEXT (fixed strings)
expect() {
    local name=$1 text
    shift
    check
    if [ "$RC" = 0 ]; then
        fail "$name: layering.sh passed"
        return
    fi
    local before=$FAILURES
    grep -q '^layering: FAILED' "$T/out" || fail "$name: no FAILED line"
    for text in "$@"; do
        grep -qF -- "$text" "$T/out" || fail "$name: no \"$text\""
    done
    [ "$FAILURES" != "$before" ] || echo "ok: $name: $(grep -F -- "$1" "$T/out" | head -1)"
}

# a global function that src/NAME.c defines
defined_in() {
    nm -P --defined-only "$fake_objs/$1.c.o" | awk '$2 == "T" { print $1; exit }'
}

# use_symbol USER SYMBOL: src/USER.c's object now also uses SYMBOL
use_symbol() {
    printf 'extern char %s[];\nchar *rjq_selftest_use_%s(void) { return %s; }\n' "$2" "$2" "$2" > "$T/plant.c"
    "$CC" -c -o "$T/plant.o" "$T/plant.c" || { echo "cannot compile the planted object"; exit 1; }
    ld -r -o "$T/merged.o" "$fake_objs/$1.c.o" "$T/plant.o" || { echo "cannot link the planted object"; exit 1; }
    mv "$T/merged.o" "$fake_objs/$1.c.o"
}

reset
check
[ "$RC" = 0 ] || fail "the unchanged copy: layering.sh failed"

# A cycle between two features (same rank: only the cycle check sees it).
reset
wsym=$(defined_in worker)
qsym=$(defined_in queue)
use_symbol queue "$wsym"
use_symbol worker "$qsym"
expect "cycle" "cycle among src/*.c" "the shortest cycle" "src/queue.c uses $wsym of src/worker.c"

# A leaf calling the core.
reset
csym=$(defined_in client)
use_symbol timer "$csym"
expect "call up" "src/timer.c (rank 0) uses $csym of src/client.c (rank 4): a call up"

# A new file nobody placed, a new header, an object missing.
reset
echo 'int rjq_selftest_unplaced(void) { return 0; }' > "$fake_src/unplaced.c"
"$CC" -c -o "$fake_objs/unplaced.c.o" "$fake_src/unplaced.c"
expect "unplaced file" "src/unplaced.c is in no layer"
reset
echo '/* nothing */' > "$fake_src/unplaced.h"
expect "unplaced header" "src/unplaced.h is in no layer"
reset
rm "$fake_objs/cron.c.o"
expect "missing object" "no object for src/cron.c"
reset
rm "$fake_src/cron.c"
expect "placed file gone" "tests/layering.sh places cron, which is not in src/"

# Includes up: a leaf including the core, the core including a feature.
reset
echo '#include "core.h"' >> "$fake_src/timer.c"
expect "leaf includes core.h" "src/timer.c (rank 0) includes core.h (rank 1): an include up"
reset
echo '#include "queue.h"' >> "$fake_src/request.c"
expect "core includes a feature" "src/request.c (rank 3) includes queue.h (rank 5): an include up"

# A feature seeing the core's struct bodies, directly or through a header.
reset
echo '#include "core_private.h"' >> "$fake_src/queue.c"
expect "feature includes core_private.h" \
    "src/queue.c (rank 5, not the core) includes core_private.h: only the core"
reset
echo '#include "core_private.h"' >> "$fake_src/job.h"
expect "feature reaches core_private.h through a header" \
    "src/job.h (rank 5, not the core) includes core_private.h" \
    "src/job.c (rank 5, not the core) includes job.h -> core_private.h"

# The rest of the core seeing the request layer's struct bodies.
reset
echo '#include "request_private.h"' >> "$fake_src/pubsub.c"
expect "pubsub.c includes request_private.h" \
    "src/pubsub.c includes request_private.h: only the request layer"

# Another feature seeing the worker layer's struct bodies.
reset
echo '#include "worker_private.h"' >> "$fake_src/job.c"
expect "job.c includes worker_private.h" \
    "src/job.c includes worker_private.h: only the worker layer"

# An include of a header in no layer.
reset
echo '#include "nowhere.h"' >> "$fake_src/queue.c"
expect "unknown header" "src/queue.c includes \"nowhere.h\", which is in no layer"

[ "$FAILURES" = 0 ] || exit 1
echo "layering.sh fails on each planted violation"
