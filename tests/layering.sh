#!/usr/bin/env bash
# The layering of src/ (DESIGN.md section 10, README "How it works"), as
# the linker sees it: which object uses a symbol another object defines.
#  - the graph has no cycle (tsort);
#  - nothing uses a file of a higher rank: leaves (0) use only leaves;
#    inside the core, runtime (1) < conn, sentinel (2) < request, pubsub (3) <
#    client, liveness (4); features (5) use anything below them (their own order is
#    kept by the no-cycle rule). A src/*.c file in no layer fails the
#    check, so a new file has to be placed.
set -euo pipefail
build=${RJQ_BUILD:?}
src=${RJQ_SOURCE:?}/src
objdir=$build/CMakeFiles/rjq_obj.dir/src

ranks=(
    "timer url validate error argv resp tls cron" # 0 leaves
    "runtime"                                     # 1 core: depth, timers, features
    "conn sentinel"                               # 2 core: connections, and where the master is
    "request pubsub"                              # 3 core: the connections' owners
    "client liveness"                             # 4 core: the public lifetime, the watchdog
    "queue enqueue held push worker reclaim upkeep job await await_table await_early monitor admin processes schedule scheduler" # 5
)

layer_of() {
    local f=$1
    for r in "${!ranks[@]}"; do
        for x in ${ranks[$r]}; do [[ $x == "$f" ]] && { echo "$r"; return; }; done
    done
    echo none
}

fail=0
for c in "$src"/*.c; do
    f=$(basename "$c" .c)
    if [[ $(layer_of "$f") == none ]]; then
        echo "src/$f.c is in no layer: add it to tests/layering.sh (and the README's diagram)"
        fail=1
    fi
    [[ -f $objdir/$f.c.o ]] || { echo "no object for src/$f.c in $objdir"; fail=1; }
done
[[ $fail == 0 ]] || exit 1

defs=$(mktemp)
edges=$(mktemp)
trap 'rm -f "$defs" "$edges"' EXIT
for o in "$objdir"/*.c.o; do
    f=$(basename "$o" .c.o)
    nm --defined-only "$o" | awk -v f="$f" '$2 ~ /^[TDBR]$/ {print $3, f}'
done | sort -k1,1 > "$defs"
for o in "$objdir"/*.c.o; do
    f=$(basename "$o" .c.o)
    nm --undefined-only "$o" | awk '{print $2}' | sort -u |
        join - "$defs" | awk -v f="$f" '$2 != f {print f, $2, $1}'
done | sort -u > "$edges"

# 1. No cycle.
if ! cut -d' ' -f1,2 "$edges" | sort -u | tsort > /dev/null 2> "$defs.err"; then
    echo "cycle among src/*.c (user -> definer):"
    cat "$defs.err"
    cut -d' ' -f1,2 "$edges" | sort -u
    rm -f "$defs.err"
    exit 1
fi
rm -f "$defs.err"

# 2. Nothing calls up a layer.
while read -r user definer sym; do
    lu=$(layer_of "$user")
    ld=$(layer_of "$definer")
    if (( ld > lu )); then
        echo "src/$user.c (rank $lu) uses $sym of src/$definer.c (rank $ld): a call up"
        fail=1
    fi
done < "$edges"
[[ $fail == 0 ]] || exit 1
echo "layering: $(cut -d' ' -f1,2 "$edges" | sort -u | wc -l) edges among $(ls "$objdir"/*.c.o | wc -l) objects, no cycle, no call up"
