/*
 * A binary min-heap of timers, keyed by due time in milliseconds. The
 * client runs one loop timer for the earliest entry (the curl-multi way).
 * Timers are embedded in their owners; a timer knows its heap slot, so
 * stopping or re-arming is O(log n) with no search.
 */
#ifndef RJQ_TIMER_H
#define RJQ_TIMER_H

#include <stddef.h>
#include <stdint.h>

#define RJQ__TIMER_IDLE ((size_t)-1)

typedef struct rjq__timer rjq__timer;
typedef void rjq__timer_fn(rjq__timer *t);

struct rjq__timer {
    uint64_t due;
    size_t idx;          /* heap slot, RJQ__TIMER_IDLE when not armed */
    rjq__timer_fn *fn;
    void *owner;
};

typedef struct rjq__timers {
    rjq__timer **heap;
    size_t n, cap;
    size_t reserved;     /* slots owners reserved: arming within them never allocates */
} rjq__timers;

/* Prepare a timer for use; it starts disarmed. */
void rjq__timer_init(rjq__timer *t, rjq__timer_fn *fn, void *owner);
int rjq__timer_armed(const rjq__timer *t);

/* Reserve room for n more timers (each owner reserves its timers when it
 * is created), so that arming them later cannot fail. 0, or -1 when out
 * of memory (nothing reserved). */
int rjq__timers_reserve(rjq__timers *h, size_t n);
/* Give back n reserved slots (the owner is gone; its timers are disarmed). */
void rjq__timers_unreserve(rjq__timers *h, size_t n);

/* Arm (or re-arm) t for `due`. Returns 0, or -1 when out of memory (only
 * possible beyond the reserved slots). */
int rjq__timers_add(rjq__timers *h, rjq__timer *t, uint64_t due);
/* Disarm t; a no-op when it is not armed. */
void rjq__timers_del(rjq__timers *h, rjq__timer *t);
/* The earliest timer, or NULL. */
rjq__timer *rjq__timers_peek(const rjq__timers *h);
/* Remove and return the earliest timer due at or before now, or NULL. */
rjq__timer *rjq__timers_pop_due(rjq__timers *h, uint64_t now);
void rjq__timers_free(rjq__timers *h);

#endif
