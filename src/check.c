/* RJQ_ASSERT's failure report (check.h). */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

int rjq__asserts_enabled(void) {
#ifdef RJQ_ASSERTS
    return 1;
#else
    return 0;
#endif
}

/* stderr is unbuffered: the line is out before abort() raises SIGABRT. */
_Noreturn void rjq__assert_failed(const char *expr, const char *file, int line, const char *func) {
    fprintf(stderr, "rjq: %s:%d: %s: assertion `%s' failed\n", file, line, func, expr);
    abort();
}
