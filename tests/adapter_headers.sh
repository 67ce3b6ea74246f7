#!/usr/bin/env bash
# The loop glue headers (adapters/rjq/*.h) state the feature macros they
# need: each compiles alone in strict ISO C (-std=c11 -Wall -Wextra
# -Werror) with just those, and as C++ with -Wold-style-cast; rjq/libuv.h
# without them stops with its own message, not uv.h's errors.
# ctest sets RJQ_SOURCE (source folder). A loop whose headers are missing
# is skipped (said so).
set -u
src=${RJQ_SOURCE:?RJQ_SOURCE must name the source folder}
dir=$(mktemp -d "${TMPDIR:-/tmp}/rjq-adapter-headers.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fails=0
inc=(-I"$src/include" -I"$src/adapters")

# compile <glue> <macros> <extra cflags...>
compile() {
    local glue=$1 macros=$2
    shift 2
    printf '%s\n#include <rjq/%s.h>\nint main(void) { return 0; }\n' "$macros" "$glue" > "$dir/$glue.c"
    if ! gcc -std=c11 -Wall -Wextra -Werror "${inc[@]}" "$@" -c "$dir/$glue.c" -o "$dir/$glue.o" 2> "$dir/$glue.err"; then
        echo "FAIL: rjq/$glue.h in C11 with '${macros:-no macro}':"; cat "$dir/$glue.err"; fails=$((fails + 1))
    fi
    cp "$dir/$glue.c" "$dir/$glue.cc"
    if command -v g++ >/dev/null &&
       ! g++ -std=c++11 -Wall -Wextra -Wold-style-cast -Werror "${inc[@]}" "$@" -c "$dir/$glue.cc" -o "$dir/$glue.o" 2> "$dir/$glue.err"; then
        echo "FAIL: rjq/$glue.h in C++:"; cat "$dir/$glue.err"; fails=$((fails + 1))
    fi
}

have() { [ -e "$1" ] || { echo "SKIP: $2 ($1 missing)"; return 1; }; }

have /usr/include/event2/event.h libevent && compile libevent ""
have /usr/include/event2/event.h "libevent with names" && compile libevent "#define _POSIX_C_SOURCE 200112L"
have /usr/include/ev.h libev && compile libev ""
if have /usr/include/uv.h libuv; then
    compile libuv "#define _POSIX_C_SOURCE 200112L"
    printf '#include <rjq/libuv.h>\n' > "$dir/bare.c"
    if gcc -std=c11 "${inc[@]}" -c "$dir/bare.c" -o "$dir/bare.o" 2> "$dir/bare.err"; then
        echo "FAIL: rjq/libuv.h compiled in strict C11 without POSIX"; fails=$((fails + 1))
    elif ! grep -q "rjq/libuv.h: uv.h needs POSIX" "$dir/bare.err" || [ "$(grep -c ': error:' "$dir/bare.err")" -ne 1 ]; then
        echo "FAIL: rjq/libuv.h without POSIX did not stop with its one message:"; cat "$dir/bare.err"; fails=$((fails + 1))
    fi
fi
if pkg-config --exists glib-2.0; then
    # GLib's own headers and macros are not -Wold-style-cast clean: theirs as system headers
    # shellcheck disable=SC2046
    compile glib "" $(pkg-config --cflags glib-2.0 | sed 's/-I/-isystem /g')
else
    echo "SKIP: glib (glib-2.0 not found)"
fi
[ "$fails" -eq 0 ] && echo "PASS" || exit 1
