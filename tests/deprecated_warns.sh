#!/usr/bin/env bash
# The deprecated names (rjq.h "Deprecated names", README "Naming") warn
# where a program uses one: every name of rjq.h's deprecated block, used in
# C (-std=c11) and C++ (-std=c++11), gets a -Wdeprecated-declarations
# warning whose message names its new name, and fails a -Werror build; the
# new names compile clean. clang too when it is there. On a compiler
# without the attribute RJQ_DEPRECATED is empty: the header and the old
# names still compile (checked with the GNU macros undefined).
# tests/test_deprecated_names.c checks what each old name does.
# ctest sets RJQ_SOURCE. /work/wt/rename-verbs.sh leaves this file alone.
set -u
src=${RJQ_SOURCE:?RJQ_SOURCE must name the source folder}
dir=$(mktemp -d "${TMPDIR:-/tmp}/rjq-deprecated.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# "old new" per deprecated declaration, from the block itself.
perl -0777 -ne '
    /BEGIN deprecated names(.*?)END deprecated names/s or die "no deprecated block\n";
    my $b = $1;
    while ($b =~ /RJQ_DEPRECATED\("use (rjq_\w+)"\)\s*RJQ_API[^;(]*?\b(rjq_\w+)\(/g) { print "$2 $1\n" }
' "$src/include/rjq.h" > "$dir/pairs" || exit 1
n=$(wc -l < "$dir/pairs")
(( n >= 33 )) || fail "only $n deprecated names found in rjq.h"

# A program that names every function of column $1 (1: old, 2: new).
program() {
    {
        echo '#include <rjq.h>'
        echo 'typedef void (*fn)(void);'
        echo 'fn names[] = {'
        awk -v c="$1" '{ print "    (fn)" $c "," }' "$dir/pairs"
        echo '};'
        echo 'int main(void) { return names[0] == 0; }'
    } > "$2"
}
program 1 "$dir/old.c"
program 2 "$dir/new.c"
cp "$dir/old.c" "$dir/old.cc"
cp "$dir/new.c" "$dir/new.cc"

# check <compiler> <file> <flags...>
check() {
    local cc=$1 f=$2
    shift 2
    command -v "$cc" > /dev/null || { echo "SKIP: no $cc"; return; }
    # the new names: clean
    "$cc" "$@" -Wall -Wextra -Werror -I"$src/include" -c "$dir/new.$f" -o "$dir/new.o" 2> "$dir/err" ||
        { fail "$cc: the new names do not compile clean:"; cat "$dir/err"; }
    # the old names: one warning each, naming the new name
    if ! "$cc" "$@" -Wall -Wextra -I"$src/include" -c "$dir/old.$f" -o "$dir/old.o" 2> "$dir/err"; then
        fail "$cc: the old names do not compile:"; cat "$dir/err"; return
    fi
    while read -r old new; do
        grep -q "$old.* is deprecated: use $new" "$dir/err" || fail "$cc $f: $old does not warn 'use $new'"
    done < "$dir/pairs"
    local w
    w=$(grep -c "is deprecated" "$dir/err")
    [[ $w == "$n" ]] || fail "$cc $f: $w deprecation warnings for $n names"
    "$cc" "$@" -Wall -Werror -I"$src/include" -c "$dir/old.$f" -o "$dir/old.o" 2> /dev/null &&
        fail "$cc $f: -Werror builds with an old name"
}
check gcc c -std=c11
check g++ cc -std=c++11
check clang c -std=c11
check clang++ cc -std=c++11

# Without the attribute (the GNU macros undefined): RJQ_DEPRECATED is empty.
if gcc -std=c11 -U__GNUC__ -U__GNUC_MINOR__ -U__clang__ -E -dM -I"$src/include" "$dir/old.c" \
       > "$dir/macros" 2> "$dir/err"; then
    grep -q '^#define RJQ_DEPRECATED(msg) *$' "$dir/macros" ||
        fail "RJQ_DEPRECATED is not empty without __GNUC__: $(grep RJQ_DEPRECATED "$dir/macros")"
else
    echo "SKIP: the preprocessor without __GNUC__ ($(head -1 "$dir/err"))"
fi

(( fails == 0 )) && echo "OK: $n deprecated names warn" && exit 0
exit 1
