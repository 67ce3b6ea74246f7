#!/usr/bin/env bash
# The key layout is declared once, in src/keys.def (README "How it works",
# "Keys"): the C call sites and the Lua scripts both take it from there, so
# they cannot drift apart. This fails when either side goes its own way:
#  - a script indexes KEYS by number (KEYS[n]) instead of the named locals
#    the build binds, or derives a name from the job prefix
#    (string.sub(prefix, 1, -5) .. 'events' and the like);
#  - C code builds a key or channel name of a queue or of the prefix by hand
#    ("%s:{%s}:...", "{clients}:...", ":queues") instead of taking it from
#    the declaration (only queue.c makes the names, from rjq__key_names);
#  - a call site lists a script's keys itself: RJQ__KEYS, rjq__argv_keys or
#    RJQ__K_COLUMNS must not compile (queue.h poisons them), while the
#    declared way does;
#  - README "Keys: one declaration" lacks a declared name;
#  - the generator accepts a declaration that does not fit the scripts (a
#    key a script never uses, one not declared, a script without KEYS, a
#    script mixing a queue's keys with the prefix's names).
# Each check is then proved to fail on a planted violation.
set -euo pipefail
build=${RJQ_BUILD:?RJQ_BUILD must name the build folder}
src=${RJQ_SOURCE:?RJQ_SOURCE must name the source folder}

# check_tree DIR: the text checks on DIR (a copy of src/), problems on stdout
check_tree() {
    local d=$1
    grep -nH 'KEYS\[' "$d"/lua/*.lua | sed 's/$/   <- KEYS indexed by number: use the named locals (src\/keys.def)/' || true
    grep -nHE 'string\.sub\(prefix' "$d"/lua/*.lua | sed 's/$/   <- a name derived from the job prefix: declare it in src\/keys.def/' || true
    grep -nHE '"[^"]*(:\{%s\}:|\{clients\}:|:queues")' "$d"/*.c | grep -vE '^[^:]+:[0-9]+:\s*(\*|/\*|//)' |
        grep -v "^$d/queue.c:" | sed 's/$/   <- a key name built by hand: take it from src\/keys.def/' || true
}

fail=0
problems=$(check_tree "$src/src")
if [ -n "$problems" ]; then
    echo "$problems"
    echo "keys_declared: FAILED" >&2
    fail=1
fi

# The C compiler and flags the library is built with (compile_commands.json).
cmd=$(grep -oE '"command": "[^"]*src/held\.c"' "$build/compile_commands.json" | head -1 |
      sed -E 's/^"command": "//; s/"$//; s/ -o [^ ]+//; s/ -c [^ ]+$//')
[ -n "$cmd" ] || { echo "keys_declared: no compile command for src/held.c in $build" >&2; exit 1; }

t=$(mktemp -d "${TMPDIR:-/tmp}/rjq-keys.XXXXXX")
trap 'rm -rf "$t"' EXIT
# compiles FILE: 0 when the library's compiler accepts it
compiles() { $cmd -fsyntax-only -c "$1" >"$t/cc.log" 2>&1; }

cat > "$t/declared.c" <<'C'
#include "queue.h"
void probe(rjq__argv *a, const rjq_queue *q);
void probe(rjq__argv *a, const rjq_queue *q) { rjq__argv_script_keys(a, q, RJQ__S_CLAIM); }
C
compiles "$t/declared.c" || { cat "$t/cc.log"; echo "keys_declared: the declared way does not compile" >&2; fail=1; }
for planted in 'RJQ__KEYS(a, q, RJQ__K_ACTIVE, RJQ__K_READY);' \
               'static const int k[] = {RJQ__K_ACTIVE}; rjq__argv_keys(a, q, k, 1);' \
               'static const int k[] = {RJQ__K_COLUMNS}; (void)k;'; do
    printf '#include "queue.h"\nvoid probe(rjq__argv *a, const rjq_queue *q);\nvoid probe(rjq__argv *a, const rjq_queue *q) { (void)a, (void)q; %s }\n' \
        "$planted" > "$t/planted.c"
    if compiles "$t/planted.c"; then
        echo "keys_declared: a call site listing keys itself compiles: $planted" >&2
        fail=1
    fi
done

# Each text check fails on a planted violation (in a copy of src/).
mkdir -p "$t/src"
cp -r "$src/src/lua" "$src/src"/*.c "$t/src/"
plant() { # FILE LINE: append LINE to the copy's FILE, expect a problem naming it
    cp "$t/src/$1" "$t/keep"
    echo "$2" >> "$t/src/$1"
    if ! check_tree "$t/src" | grep -qF "$2"; then
        echo "keys_declared: the check misses: $2 (in $1)" >&2
        fail=1
    fi
    cp "$t/keep" "$t/src/$1"
}
plant lua/claim.lua "local deadlines = KEYS[17]"
plant lua/fire.lua "local ch = string.sub(prefix, 1, -5) .. 'events'"
plant admin.c '    snprintf(key, sizeof key, "%s:{%s}:stats", prefix, name);'
plant upkeep.c '    snprintf(k, len, "%s:{clients}:%s", prefix, name);'
plant processes.c '    snprintf(key, sizeof key, "%s:queues", prefix);'
[ -z "$(check_tree "$t/src")" ] || { echo "keys_declared: the copy is not clean after planting" >&2; fail=1; }

# README "Keys: one declaration" names every declared name.
# readme_misses FILE: the declared names its Keys section lacks
readme_misses() {
    local section
    section=$(awk '/^### Keys: one declaration/ { on = 1; next } on && /^### / { exit } on' "$1")
    awk '$1 == "key" || $1 == "global" { print $3 }' "$src/src/keys.def" | while read -r name; do
        case "$section" in *"\`$name\`"*) ;; *) echo "$name" ;; esac
    done
}
missing=$(readme_misses "$src/README.md")
if [ -n "$missing" ]; then
    echo "keys_declared: README \"Keys: one declaration\" lacks: "$missing >&2
    fail=1
fi
sed 's/`deadlines`/`deadline`/' "$src/README.md" > "$t/README.md"
[ "$(readme_misses "$t/README.md")" = deadlines ] || { echo "keys_declared: the README check misses a planted omission" >&2; fail=1; }

# The generator (cmake/embed_lua.cmake) refuses a declaration that does not fit the
# scripts: a key a script never uses, a key not declared, a script without KEYS.
# gen DEF: 0 when it generates from DEF
gen() {
    local scripts
    scripts=$(awk '$1 == "script" { printf "%s%s", sep, $2; sep = "," }' "$src/src/keys.def")
    cmake -DLUA_DIR="$src/src/lua" -DSCRIPTS="$scripts" -DKEYS_DEF="$1" -DOUT_C="$t/s.c" -DOUT_H="$t/s.h" \
          -DOUT_KEYS_H="$t/k.h" -DOUT_KEYS_C="$t/k.c" -P "$src/cmake/embed_lua.cmake" >"$t/gen.log" 2>&1
}
gen "$src/src/keys.def" || { cat "$t/gen.log"; echo "keys_declared: src/keys.def does not generate" >&2; fail=1; }
for edit in 's/^script pause META IDLE MONITORED EVENTS$/& WAITERS/' \
            's/^script pause META IDLE MONITORED EVENTS$/& NOSUCHKEY/' \
            '/^script unlease /d' \
            's/^script reserve STATS RESERVED PRIO$/script reserve STATS RESERVED PRIO LIVE/'; do
    sed "$edit" "$src/src/keys.def" > "$t/keys.def"
    if cmp -s "$t/keys.def" "$src/src/keys.def"; then
        echo "keys_declared: planting $edit changed nothing" >&2; fail=1
    elif gen "$t/keys.def"; then
        echo "keys_declared: the generator accepts a declaration planted with $edit" >&2; fail=1
    fi
done

[ $fail = 0 ] && echo "keys_declared: PASS (no KEYS[n], no derived names, no hand-built key names; listing keys does not compile)"
exit $fail
