#!/usr/bin/env bash
# rjq's own command buffers (script calls, transactions of several calls)
# under valgrind: hiredis reads the byte after a command's name to see
# whether arguments follow, so a buffer must end with a NUL as hiredis' own
# formatted commands do (an EXEC at the very end of a transaction's buffer
# was read one byte past it). The system's hiredis is not instrumented, so
# AddressSanitizer cannot see such a read; valgrind can.
set -eu
build=${RJQ_BUILD:?RJQ_BUILD must name the build folder}
if grep -q '^RJQ_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
    echo "SKIP: a sanitized build does not run under valgrind"
    exit 0
fi
for t in enqueue_batches_are_capped_by_bytes \
         batch_of_several_calls_survives_function_flush; do
    valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 \
        "$build/tests/test_regressions" "$t"
done
echo "PASS: rjq's command buffers under valgrind"
