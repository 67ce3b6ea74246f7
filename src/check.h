/*
 * RJQ_ASSERT(expr): an invariant of the library's own state, checked in
 * the builds the test suite runs and compiled out of release builds.
 *
 * The builds configured with -DRJQ_ASSERTS=ON (both test passes of
 * `make test`: the RelWithDebInfo build, whose -DNDEBUG removes assert(),
 * and the ASan build) define RJQ_ASSERTS: a false expr prints
 * "rjq: file:line: function: assertion `expr' failed" on stderr and
 * aborts. Without it the expression is not evaluated (it is only seen by
 * sizeof, so a variable read only by asserts stays "used").
 *
 * An assert states what the code already relies on (a state machine's
 * legal transitions, a list's shape, an entry point not re-entered); it
 * never checks input from the network or the caller, which is refused
 * with an error code instead.
 */
#ifndef RJQ_CHECK_H
#define RJQ_CHECK_H

#ifdef RJQ_ASSERTS
#define RJQ_ASSERT(expr) \
    ((expr) ? (void)0 : rjq__assert_failed(#expr, __FILE__, __LINE__, __func__))
#else
#define RJQ_ASSERT(expr) ((void)sizeof(!(expr)))
#endif

/* 1 when this build checks its RJQ_ASSERTs (the test builds). */
int rjq__asserts_enabled(void);

/* Print where and what failed, then abort(). Never returns. */
_Noreturn void rjq__assert_failed(const char *expr, const char *file, int line, const char *func);

#endif /* RJQ_CHECK_H */
