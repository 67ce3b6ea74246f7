/*
 * The client's timers in virtual time (rjq__clock_set, core.h), shared by
 * the unit tests that run them: the loop's set_timer records the one timer
 * the client asks for (armed_ms); the test moves the clock (vnow) to it
 * and fires it. With vclock_io_ops the client's I/O runs on libevent (a
 * real server) while its timers stay virtual. A test installs the clock
 * with rjq__clock_set(virtual_clock) and sets armed_ms to -1 first.
 */
#ifndef RJQ_TEST_VCLOCK_H
#define RJQ_TEST_VCLOCK_H

#include <stdint.h>

#include <event2/event.h>

#include "rjq.h"

extern uint64_t vnow;  /* virtual ms */
extern long armed_ms;  /* the client's timer: its last set_timer (-1: none since it fired) */

/* The clock to give rjq__clock_set: vnow. */
uint64_t virtual_clock(void);
/* A loop's set_timer: records ms in armed_ms. */
void fake_set_timer(void *loop, long ms);

/* I/O on the libevent base given as the loop, timers virtual. */
extern const rjq_loop_ops vclock_io_ops;

/* Move the clock to the client's timer and fire it (the loop's part). */
void vclock_step(rjq_client *c);
/* A moment of I/O (real time) and the client's timers due now (the
 * virtual clock stands still meanwhile). */
void vclock_io(struct event_base *base, rjq_client *c);
/* What the client waits for arrives (I/O, real time) until it arms a
 * timer, then the clock moves to it and it fires; nothing moves once
 * *done (may be NULL) is set. */
void vclock_run_to_timer(struct event_base *base, rjq_client *c, const int *done);

#endif
