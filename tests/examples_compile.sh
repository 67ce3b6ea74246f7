#!/usr/bin/env bash
# Every example (examples/*.c) and the README's complete program (its C
# block with main()) compile as a user builds them, outside the project's
# flags (no -D_GNU_SOURCE): `cc -std=c11 -Wall -Wextra -Werror` and
# `-std=gnu11`, against include/ and adapters/ (issue 37 "Done means").
# The examples on libevent need its headers (pkg-config libevent_core).
# ctest sets RJQ_SOURCE (source folder).
set -eu
src=${RJQ_SOURCE:?RJQ_SOURCE must name the source folder}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
ev=$(pkg-config --cflags libevent_core 2>/dev/null || true)
failed=0

# the README's complete program: the ```c block that has main()
awk '/^```c$/ { f = 1; b = ""; next }
     /^```$/ && f { f = 0; if (b ~ /int main\(/) { printf "%s", b; exit } next }
     f { b = b $0 "\n" }' "$src/README.md" > "$tmp/readme_program.c"
[ -s "$tmp/readme_program.c" ] || { echo "FAIL: no C block with main() in README.md" >&2; exit 1; }

for f in "$tmp/readme_program.c" "$src"/examples/*.c; do
    for std in c11 gnu11; do
        if ! $cc -std=$std -Wall -Wextra -Werror -fsyntax-only -I"$src/include" -I"$src/adapters" \
                $ev "$f" 2> "$tmp/err"; then
            echo "FAIL: $(basename "$f") (-std=$std -Wall -Wextra -Werror):" >&2
            head -20 "$tmp/err" >&2
            failed=1
        fi
    done
done
[ $failed = 0 ] || exit 1
echo "PASS: README program and $(ls "$src"/examples/*.c | wc -l) examples compile with -Wall -Wextra -Werror"
