#!/usr/bin/env bash
# The layering of src/ (DESIGN.md section 10, README "How it works").
#
# As the linker sees it: which object uses a symbol another object defines.
#  - the graph has no cycle (tsort);
#  - nothing uses a file of a higher rank: leaves (0) use only leaves;
#    inside the core, runtime (1) < conn, sentinel, route (2) < request, pubsub (3) <
#    client, liveness (4); features (5) use anything below them, the deprecated
#    names (6) the public functions they call (the features' own order is
#    kept by the no-cycle rule). A src/*.c file in no layer fails the
#    check, so a new file has to be placed.
# As the preprocessor sees it: which file includes which header.
#  - nothing includes a header of a higher rank (a header has its .c's rank,
#    or the one listed in `headers` below): leaves include no core or
#    feature header, the core includes no feature header;
#  - core_private.h (the core's struct bodies) is reached, directly or
#    through other headers, from core files (ranks 1-4) only: every other
#    layer sees the core's interface, core.h.
#  - request_private.h (the request layer's struct bodies) is reached from
#    the request layer's files (request_layer below) only; worker_private.h
#    likewise from the worker layer's (worker_layer below).
#  - a src/*.h file, or a quoted include, in no layer fails the check.
# Every problem found is reported, then the check fails.
#
# One nm, one grep, one awk, one tsort: no process per file or edge.
# tests/layering_selftest.sh proves each check fails on a planted violation.
set -euo pipefail
build=${RJQ_BUILD:?}
src=${RJQ_SOURCE:?}/src
objdir=$build/CMakeFiles/rjq_obj.dir/src

ranks=(
    "timer url validate headers error argv resp tls cron check slot slotmap ssbook replyarena readin writeout gather" # 0 leaves
    "runtime"                                     # 1 core: depth, timers, features
    "conn sentinel shardlink route"               # 2 core: connections, where the master is, routing by slot
    "request reqstate scripts txn durable pubsub" # 3 core: the connections' owners
    "client liveness masters ioglue"              # 4 core: the public lifetime, the watchdog, each master, rjq_io_ops
    "queue enqueue enqueue_check held push worker worker_state worker_stop worker_fetch worker_claim worker_group worker_wake worker_notice worker_lease worker_push worker_job reclaim upkeep job await await_table await_early monitor admin index processes schedule scheduler shard shard_ids shard_split shard_resplit shard_resplitter shard_groups history history_math history_read deps deps_read groups batch batch_call flow" # 5
    "deprecated"                                  # 6 the deprecated names: each calls its new name
)
# The request layer's files: the only ones that see request_private.h.
request_layer="request reqstate scripts txn durable"
# The worker layer's files: the only ones that see worker_private.h.
worker_layer="worker worker_state worker_stop worker_fetch worker_claim worker_group worker_wake worker_notice worker_lease worker_push worker_job"
# Headers that are not a src/*.c file's own, and their rank.
# ("outside": not in src/.)
headers=(
    "compat.h 0"               # leaf: hiredis version shims
    "rjq.h 0 outside"          # include/: the public API, for everyone
    "rjq_scripts.h 0 outside"  # generated from src/lua: script names and bodies
    "rjq_keys.h 5 outside"     # generated from src/keys.def: the key layout (queue.h)
    "core.h 1"                 # the core's interface, for the core and the features
    "core_private.h 1"         # the core's struct bodies, for the core only (ranks 1-4)
    "request_private.h 3"      # the request layer's, for its files only (request_layer below)
    "worker_private.h 5"       # the worker layer's, for its files only (worker_layer below)
)

[[ -d $objdir ]] || { echo "no objects in $objdir: build first"; exit 1; }
[[ -d $src ]] || { echo "no sources in $src"; exit 1; }

t=$(mktemp -d "${TMPDIR:-/tmp}/rjq-layering.XXXXXX")
trap 'rm -rf "$t"' EXIT
{
    for r in "${!ranks[@]}"; do
        for x in ${ranks[$r]}; do echo "$x $r"; done
    done
    printf '%s\n' "${headers[@]}"
} > "$t/layers"
shopt -s nullglob
(cd "$src" && printf '%s\n' *.c *.h) > "$t/files"
(cd "$objdir" && printf '%s\n' *.c.o) > "$t/objs"
objs=("$objdir"/*.c.o)
if (( ${#objs[@]} )); then
    (cd "$objdir" && nm -A -P *.c.o) > "$t/nm"
else
    : > "$t/nm"
fi
(cd "$src" && grep -H -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' /dev/null *.c *.h || true) > "$t/incl"

fail=0
awk -v objdir="$objdir" -v reqlayer="$request_layer" -v wlayer="$worker_layer" -v edges="$t/edges" -v pairs="$t/pairs" -v summary="$t/summary" '
function hrank(h,    stem) {
    if (h in rank) return rank[h]
    stem = h; sub(/\.h$/, "", stem)
    if ((stem ".c") in files && stem in rank) return rank[stem]
    return ""
}
function frank(f,    stem) {
    if (f ~ /\.c$/) { stem = f; sub(/\.c$/, "", stem); return (stem in rank) ? rank[stem] : "" }
    return hrank(f)
}
# The chain of includes by which f reaches target ("a.h -> target"), or "".
function via(f, target, id,    n, i, h, r, parts) {
    if ((id SUBSEP f) in seen) return ""
    seen[id, f] = 1
    n = split(incs[f], parts, " ")
    for (i = 1; i <= n; i++) {
        h = parts[i]
        if (h == target) return h
        r = via(h, target, id)
        if (r != "") return h " -> " r
    }
    return ""
}
FNR == 1 { part++ }
part == 1 { rank[$1] = $2; if ($3 != "outside") placed[$1] = 1; next }
part == 2 {
    files[$0] = 1; nfiles++
    if ($0 ~ /\.c$/) { stem = $0; sub(/\.c$/, "", stem); cfile[stem] = 1; ncfiles++ }
    next
}
part == 3 { o = $0; sub(/\.c\.o$/, "", o); obj[o] = 1; next }
part == 4 {
    # nm -A -P: "file.c.o: symbol type [value size]"
    o = $1; sub(/:$/, "", o); sub(/\.c\.o$/, "", o)
    if (!(o in cfile)) next  # an object whose source is gone (stale build)
    if ($3 ~ /^[TDBR]$/) def[$2] = def[$2] " " o
    else if ($3 == "U" && !((o SUBSEP $2) in used)) { used[o, $2] = 1; nuse++; usr[nuse] = o; usym[nuse] = $2 }
    next
}
part == 5 {
    # grep -H: "file:#include \"header\" ..."
    p = index($0, ":"); f = substr($0, 1, p - 1); line = substr($0, p + 1)
    if (!match(line, /"[^"]*"/)) next
    h = substr(line, RSTART + 1, RLENGTH - 2)
    if ((f SUBSEP h) in inc) next
    inc[f, h] = 1; incs[f] = incs[f] " " h; nincs++
    next
}
function bad(msg) { print msg; fails++ }
# Only the files of layer (their stems) reach header h.
function private_to(h, layer, name,    n, i, l, mine, f, stem, chain) {
    n = split(layer, l, " ")
    for (i = 1; i <= n; i++) mine[l[i]] = 1
    for (f in files) {
        stem = f; sub(/\.[ch]$/, "", stem)
        if ((stem in mine) || f == h) continue
        chain = via(f, h, ++id)
        if (chain != "")
            bad("src/" f " includes " chain ": only " name " (" layer ") sees " h)
    }
}
END {
    # Every file placed, every .c built, every placed name a file.
    for (c in cfile) {
        if (!(c in rank)) bad("src/" c ".c is in no layer: add it to tests/layering.sh (and the README'"'"'s diagram)")
        if (!(c in obj)) bad("no object for src/" c ".c in " objdir)
    }
    for (f in files)
        if (f ~ /\.h$/ && hrank(f) == "")
            bad("src/" f " is in no layer: name it after its .c, or list it in tests/layering.sh'"'"'s headers")
    for (x in placed)
        if (!(x in files) && !((x ".c") in files))
            bad("tests/layering.sh places " x ", which is not in src/: remove it from the table")

    # The linker graph: user -> definer, and no call up.
    nedges = 0
    for (i = 1; i <= nuse; i++) {
        u = usr[i]; s = usym[i]
        if (!(s in def)) continue
        n = split(def[s], ds, " ")
        for (j = 1; j <= n; j++) {
            d = ds[j]
            if (d == u) continue
            print u, d, s > edges
            if (!((u SUBSEP d) in pair)) { pair[u, d] = 1; print u, d > pairs; nedges++ }
            lu = frank(u ".c"); ld = frank(d ".c")
            if (lu != "" && ld != "" && ld + 0 > lu + 0)
                bad("src/" u ".c (rank " lu ") uses " s " of src/" d ".c (rank " ld "): a call up")
        }
    }
    close(edges); close(pairs)

    # The include graph: no include up; core_private.h for the core only.
    for (k in inc) {
        split(k, fh, SUBSEP); f = fh[1]; h = fh[2]
        rh = hrank(h)
        if (rh == "") {
            if (!(h in files))
                bad("src/" f " includes \"" h "\", which is in no layer: list it in tests/layering.sh'"'"'s headers")
            continue
        }
        rf = frank(f)
        if (rf != "" && rh + 0 > rf + 0)
            bad("src/" f " (rank " rf ") includes " h " (rank " rh "): an include up")
    }
    id = 0
    for (f in files) {
        rf = frank(f)
        if (rf == "" || (rf + 0 >= 1 && rf + 0 <= 4) || f == "core_private.h") continue
        chain = via(f, "core_private.h", ++id)
        if (chain != "")
            bad("src/" f " (rank " rf ", not the core) includes " chain ": only the core (ranks 1-4) sees its struct bodies; include core.h")
    }
    private_to("request_private.h", reqlayer, "the request layer")
    private_to("worker_private.h", wlayer, "the worker layer")
    printf "%d edges among %d objects, %d includes among %d files", nedges, ncfiles, nincs, nfiles > summary
    exit (fails ? 1 : 0)
}
' "$t/layers" "$t/files" "$t/objs" "$t/nm" "$t/incl" > "$t/problems" || fail=1
touch "$t/edges" "$t/pairs"

# No cycle: tsort names the files in loops; the shortest cycle among them
# is spelled out, one symbol per edge.
if ! tsort "$t/pairs" > /dev/null 2> "$t/tsort.err"; then
    sed -n 's/^tsort: \([^ :]*\)$/\1/p' "$t/tsort.err" | sort -u > "$t/loop"
    awk 'FNR == NR { in_loop[$1] = 1; members = members " src/" $1 ".c"; next }
        ($1 in in_loop) && ($2 in in_loop) && !(($1 SUBSEP $2) in sym) {
            sym[$1, $2] = $3; adj[$1] = adj[$1] " " $2
        }
        END {
            print "cycle among src/*.c: files in a loop:" members
            best = ""
            for (s in in_loop) {
                split("", prev); head = 1; tail = 0; q[++tail] = s; found = 0
                while (head <= tail && !found) {
                    u = q[head++]; n = split(adj[u], nb, " ")
                    for (i = 1; i <= n && !found; i++) {
                        v = nb[i]
                        if (v == s) { prev[s] = u; found = 1 }
                        else if (!(v in prev)) { prev[v] = u; q[++tail] = v }
                    }
                }
                if (!found) continue
                path = s; len = 1; cur = s
                while (prev[cur] != s) { cur = prev[cur]; path = cur " " path; len++ }
                if (best == "" || len < bestlen) { best = s " " path; bestlen = len }
            }
            n = split(best, c, " ")
            print "the shortest cycle (user -> definer):"
            for (i = 1; i < n; i++)
                print "  src/" c[i] ".c uses " sym[c[i], c[i + 1]] " of src/" c[i + 1] ".c"
        }' "$t/loop" "$t/edges" > "$t/cycle"
    fail=1
fi

if [[ $fail != 0 ]]; then
    sort "$t/problems"
    [[ ! -f $t/cycle ]] || cat "$t/cycle"
    echo "layering: FAILED (DESIGN.md section 10)"
    exit 1
fi
echo "layering: $(cat "$t/summary"): no cycle, no call up, no include up, core_private.h in the core only, request_private.h in the request layer only"
