#!/usr/bin/env bash
# The layering of src/ (DESIGN.md section 10, README "How it works"), as
# the linker sees it: which object uses a symbol another object defines.
#  - the graph has no cycle (tsort);
#  - leaves use only leaves; the core uses only the core and leaves;
#    features use anything below them. A src/*.c file in no layer fails
#    the check, so a new file has to be placed.
set -euo pipefail
build=${RJQ_BUILD:?}
src=${RJQ_SOURCE:?}/src
objdir=$build/CMakeFiles/rjq_obj.dir/src

leaves="timer url validate error argv resp"
core="runtime conn request pubsub client"
features="queue enqueue push worker reclaim job await await_table await_early monitor admin"

layer_of() {
    local f=$1
    for x in $leaves; do [[ $x == "$f" ]] && { echo 0; return; }; done
    for x in $core; do [[ $x == "$f" ]] && { echo 1; return; }; done
    for x in $features; do [[ $x == "$f" ]] && { echo 2; return; }; done
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
        echo "src/$user.c (layer $lu) uses $sym of src/$definer.c (layer $ld): a call up"
        fail=1
    fi
done < "$edges"
[[ $fail == 0 ]] || exit 1
echo "layering: $(cut -d' ' -f1,2 "$edges" | sort -u | wc -l) edges among $(ls "$objdir"/*.c.o | wc -l) objects, no cycle, no call up"
