/* The client's timers in virtual time (vclock.h). */
#include "vclock.h"

#include <hiredis/adapters/libevent.h>

#include "harness.h"
#include "server.h"

uint64_t vnow = 1000000;
long armed_ms = -1;

uint64_t virtual_clock(void) {
    return vnow;
}

void fake_set_timer(void *loop, long ms) {
    (void)loop;
    armed_ms = ms;
}

static int libevent_attach(void *loop, struct redisAsyncContext *ac) {
    return redisLibeventAttach(ac, loop) == REDIS_OK ? 0 : -1;
}

const rjq_loop_ops vclock_io_ops = {sizeof(rjq_loop_ops), libevent_attach, fake_set_timer, NULL, NULL, NULL, NULL, NULL};

void vclock_step(rjq_client *c) {
    ASSERT(armed_ms >= 0);
    vnow += (uint64_t)armed_ms;
    armed_ms = -1;
    rjq_client_handle_timeout(c);
}

void vclock_io(struct event_base *base, rjq_client *c) {
    for (int i = 0; i < 4; i++) {
        loop_for(base, 5);
        if (armed_ms == 0) {
            armed_ms = -1;
            rjq_client_handle_timeout(c);
        }
    }
}

void vclock_run_to_timer(struct event_base *base, rjq_client *c, const int *done) {
    double end = mono_ms() + 30000;
    while (armed_ms < 0 && !(done && *done)) {
        ASSERT(mono_ms() < end);
        vclock_io(base, c);
    }
    if (done && *done) return;
    vclock_step(c);
    vclock_io(base, c);
}
