#!/usr/bin/env bash
# The evdns glue's lifetimes under valgrind (libevent is not instrumented,
# so AddressSanitizer cannot see a read of a freed evdns base inside it):
# a client freed with lookups pending on its own resolver, and lookups
# against a DNS server on loopback, freed from inside their own event.
set -eu
build=${RJQ_BUILD:?RJQ_BUILD must name the build folder}
if grep -q '^RJQ_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
    echo "SKIP: a sanitized build does not run under valgrind"
    exit 0
fi
for t in client_freed_with_lookups_pending_on_its_own_resolver \
         evdns_resolves_names_through_a_dns_server \
         resolver_failing_inside_its_hook_reports_from_the_loop; do
    valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 \
        "$build/tests/test_resolve" "$t"
done
echo "PASS: the evdns glue under valgrind"
