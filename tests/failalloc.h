/*
 * Allocation-failure injection for tests, by link-time wrapping.
 *
 * A test executable that opts in (tests/CMakeLists.txt:
 * rjq_use_failalloc(<target>)) is linked with failalloc.c and
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup,
 * so every call to those five from the objects linked into it (rjq's own
 * sources, the test helpers, the test) goes through failalloc first. Calls
 * made inside shared libraries (hiredis, libevent, libc) are not seen, and
 * free is not wrapped. Under ASan the real functions are ASan's, so leaks
 * and misuse are still reported.
 *
 * Disarmed (the default) it only forwards. Armed, it counts allocation
 * calls and makes the chosen ones return NULL with errno = ENOMEM:
 *
 *   for (long n = 0;; n++) {
 *       failalloc_arm_once(n);         // calls 0..n-1 succeed, call n fails
 *       int rc = code_under_test();
 *       failalloc_disarm();
 *       if (failalloc_failures() == 0) break;  // needed <= n allocations
 *       ... check rc, and that nothing leaked or was left half-built ...
 *   }
 *
 * An allocation call is malloc, calloc, strdup, strndup, or realloc with a
 * size > 0 (realloc(NULL, n) included); realloc(p, 0) frees and is only
 * forwarded. Not thread-safe: arm and disarm around single-threaded code.
 */
#ifndef RJQ_TEST_FAILALLOC_H
#define RJQ_TEST_FAILALLOC_H

/* Let n more allocations succeed, fail the next one, succeed afterwards. */
void failalloc_arm_once(long n);
/* Let n more allocations succeed, then fail every one until disarmed. */
void failalloc_arm_from(long n);
/* Stop failing and counting; the counts stay readable until the next arm. */
void failalloc_disarm(void);
/* Allocation calls seen since the last arm (failed ones included). */
long failalloc_count(void);
/* Allocation calls made to fail since the last arm. */
long failalloc_failures(void);

#endif
