/* Allocation-failure injection: see failalloc.h. The linker's --wrap=f
 * sends our objects' calls of f to __wrap_f and makes __real_f the
 * original (libc's, or ASan's interceptor). */
#include "failalloc.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t nmemb, size_t size);
void *__real_realloc(void *ptr, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t nmemb, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static enum { OFF, ONCE, FROM, MIN_SIZE } mode = OFF;
static long fail_at, seen, failed;
static size_t fail_size; /* MIN_SIZE: fail requests of this many bytes or more */

static void arm(int m, long n) {
    seen = failed = 0;
    fail_at = n < 0 ? 0 : n;
    mode = m;
}

void failalloc_arm_once(long n) { arm(ONCE, n); }
void failalloc_arm_from(long n) { arm(FROM, n); }

void failalloc_arm_min_size(size_t min_size) {
    fail_size = min_size;
    arm(MIN_SIZE, 0);
}

void failalloc_disarm(void) { mode = OFF; }
long failalloc_count(void) { return seen; }
long failalloc_failures(void) { return failed; }

/* Counts one allocation call of size bytes; 1 when it is to fail. */
static int injected(size_t size) {
    if (mode == OFF) return 0;
    long i = seen++;
    if (mode == MIN_SIZE ? size < fail_size : i < fail_at || (mode == ONCE && i > fail_at))
        return 0;
    failed++;
    errno = ENOMEM;
    return 1;
}

void *__wrap_malloc(size_t size) { return injected(size) ? NULL : __real_malloc(size); }

void *__wrap_calloc(size_t nmemb, size_t size) {
    size_t total = nmemb && size > SIZE_MAX / nmemb ? SIZE_MAX : nmemb * size;
    return injected(total) ? NULL : __real_calloc(nmemb, size);
}

void *__wrap_realloc(void *ptr, size_t size) {
    if (ptr != NULL && size == 0) return __real_realloc(ptr, size); /* a free */
    return injected(size) ? NULL : __real_realloc(ptr, size);        /* ptr untouched */
}

char *__wrap_strdup(const char *s) {
    return injected(strlen(s) + 1) ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n) {
    return injected(strnlen(s, n) + 1) ? NULL : __real_strndup(s, n);
}
