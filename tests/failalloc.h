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
 *
 * Where the allocation to fail is not the Nth of a known sequence (it runs
 * inside the event loop, after other work), failalloc_arm_min_size() picks
 * it by its size instead: a test makes the one it targets big (a payload,
 * a result, a long argument list) and every other allocation stays small.
 * Its size is what the call asks for: calloc's nmemb * size, the length of
 * strdup's and strndup's copy plus its terminating NUL.
 */
#ifndef RJQ_TEST_FAILALLOC_H
#define RJQ_TEST_FAILALLOC_H

#include <stddef.h>

/* Let n more allocations succeed, fail the next one, succeed afterwards. */
void failalloc_arm_once(long n);
/* Let n more allocations succeed, then fail every one until disarmed. */
void failalloc_arm_from(long n);
/* Fail every allocation of at least min_size bytes until disarmed; smaller
 * ones succeed. All are counted. */
void failalloc_arm_min_size(size_t min_size);
/* Stop failing and counting; the counts stay readable until the next arm. */
void failalloc_disarm(void);
/* Allocation calls seen since the last arm (failed ones included). */
long failalloc_count(void);
/* Allocation calls made to fail since the last arm. */
long failalloc_failures(void);

#endif
