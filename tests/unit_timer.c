/* Unit tests for the timer min-heap (src/timer.c). No Redis. */
#include <stdint.h>

#include "failalloc.h"
#include "harness.h"
#include "timer.h"

/* Deterministic xorshift64*, so a failure reproduces. */
static uint64_t rng_state;
static uint64_t rng(void) {
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void noop_fn(rjq__timer *t) { (void)t; }

/* The heap property and every slot's back-pointer. */
static void check_heap(const rjq__timers *h) {
    ASSERT(h->n <= h->cap);
    for (size_t i = 0; i < h->n; i++) {
        ASSERT(h->heap[i] != NULL);
        ASSERT_EQ(i, h->heap[i]->idx);
        if (i > 0) ASSERT(h->heap[(i - 1) / 2]->due <= h->heap[i]->due);
    }
}

#define NT 97

/* Brute-force model: armed flag and due per timer. */
typedef struct model {
    int armed[NT];
    uint64_t due[NT];
} model;

static size_t model_count(const model *m) {
    size_t n = 0;
    for (int i = 0; i < NT; i++) n += (size_t)m->armed[i];
    return n;
}

/* Minimum due among armed timers; returns 0 when none is armed. */
static int model_min(const model *m, uint64_t *min) {
    int any = 0;
    for (int i = 0; i < NT; i++) {
        if (!m->armed[i]) continue;
        if (!any || m->due[i] < *min) *min = m->due[i];
        any = 1;
    }
    return any;
}

static void check_against_model(const rjq__timers *h, rjq__timer *ts, const model *m) {
    check_heap(h);
    ASSERT_EQ(model_count(m), h->n);
    for (int i = 0; i < NT; i++) {
        ASSERT_EQ(m->armed[i], rjq__timer_armed(&ts[i]));
        if (m->armed[i]) {
            ASSERT_EQ(m->due[i], ts[i].due);
            ASSERT(h->heap[ts[i].idx] == &ts[i]);
        }
    }
    uint64_t min = 0;
    rjq__timer *top = rjq__timers_peek(h);
    if (model_min(m, &min)) {
        ASSERT(top != NULL);
        ASSERT_EQ(min, top->due);
    } else {
        ASSERT(top == NULL);
    }
}

TEST(timer_init_is_idle) {
    rjq__timer t;
    int owner;
    memset(&t, 0xab, sizeof t);
    rjq__timer_init(&t, noop_fn, &owner);
    ASSERT(!rjq__timer_armed(&t));
    ASSERT(t.fn == noop_fn);
    ASSERT(t.owner == &owner);
    rjq__timers h = {0};
    ASSERT(rjq__timers_peek(&h) == NULL);
    ASSERT(rjq__timers_pop_due(&h, UINT64_MAX) == NULL);
    rjq__timers_free(&h);
}

TEST(timer_random_ops_match_model) {
    rjq__timer ts[NT];
    model m;
    rjq__timers h = {0};
    memset(&m, 0, sizeof m);
    for (int i = 0; i < NT; i++) rjq__timer_init(&ts[i], noop_fn, &ts[i]);
    rng_state = 0x9E3779B97F4A7C15ULL;
    uint64_t now = 0;
    long pops = 0, rearms = 0, dels = 0;
    for (int step = 0; step < 20000; step++) {
        int i = (int)(rng() % NT);
        /* A narrow range of dues (lots of ties) for half the run, wide after. */
        uint64_t span = step < 10000 ? 64 : 1000000;
        uint64_t due = now + rng() % span;
        switch (rng() % 8) {
        case 0: case 1: case 2: case 3: /* add or re-arm */
            if (m.armed[i]) rearms++;
            ASSERT_EQ(0, rjq__timers_add(&h, &ts[i], due));
            m.armed[i] = 1;
            m.due[i] = due;
            break;
        case 4: case 5: /* delete (idle ones too) */
            if (m.armed[i]) dels++;
            rjq__timers_del(&h, &ts[i]);
            m.armed[i] = 0;
            break;
        case 6: { /* pop everything due at `now` */
            now += rng() % (span / 16 + 1);
            rjq__timer *t;
            uint64_t last = 0;
            while ((t = rjq__timers_pop_due(&h, now)) != NULL) {
                int k = (int)(t - ts);
                ASSERT(k >= 0 && k < NT);
                ASSERT(m.armed[k]);
                uint64_t min = 0;
                ASSERT(model_min(&m, &min));
                ASSERT_EQ(min, t->due);
                ASSERT(t->due <= now);
                ASSERT(t->due >= last);
                last = t->due;
                ASSERT(!rjq__timer_armed(t));
                m.armed[k] = 0;
                pops++;
            }
            uint64_t min = 0;
            if (model_min(&m, &min)) ASSERT(min > now);
            break;
        }
        default: { /* peek only */
            rjq__timer *t = rjq__timers_peek(&h);
            if (t) ASSERT(rjq__timer_armed(t));
            break;
        }
        }
        check_against_model(&h, ts, &m);
    }
    /* The run exercised every path. */
    ASSERT(pops > 500);
    ASSERT(rearms > 500);
    ASSERT(dels > 500);
    /* Drain in order. */
    uint64_t last = 0;
    size_t left = h.n;
    for (size_t k = 0; k < left; k++) {
        rjq__timer *t = rjq__timers_pop_due(&h, UINT64_MAX);
        ASSERT(t != NULL);
        ASSERT(t->due >= last);
        last = t->due;
        m.armed[t - ts] = 0;
        check_against_model(&h, ts, &m);
    }
    ASSERT(rjq__timers_pop_due(&h, UINT64_MAX) == NULL);
    ASSERT_EQ(0, h.n);
    rjq__timers_free(&h);
}

TEST(timer_pop_due_respects_now) {
    rjq__timer a, b, c;
    rjq__timers h = {0};
    rjq__timer_init(&a, noop_fn, NULL);
    rjq__timer_init(&b, noop_fn, NULL);
    rjq__timer_init(&c, noop_fn, NULL);
    ASSERT_EQ(0, rjq__timers_add(&h, &b, 200));
    ASSERT_EQ(0, rjq__timers_add(&h, &c, 300));
    ASSERT_EQ(0, rjq__timers_add(&h, &a, 100));
    ASSERT(rjq__timers_peek(&h) == &a);
    ASSERT(rjq__timers_pop_due(&h, 0) == NULL);
    ASSERT(rjq__timers_pop_due(&h, 99) == NULL);
    ASSERT_EQ(3, h.n);
    ASSERT(rjq__timers_pop_due(&h, 100) == &a); /* due == now is due */
    ASSERT(!rjq__timer_armed(&a));
    ASSERT(rjq__timers_pop_due(&h, 100) == NULL);
    ASSERT(rjq__timers_pop_due(&h, 1000) == &b);
    ASSERT(rjq__timers_pop_due(&h, 1000) == &c);
    ASSERT(rjq__timers_pop_due(&h, 1000) == NULL);
    ASSERT_EQ(0, h.n);
    ASSERT(rjq__timers_peek(&h) == NULL);
    /* A popped timer can be armed again. */
    ASSERT_EQ(0, rjq__timers_add(&h, &a, 5));
    ASSERT(rjq__timer_armed(&a));
    ASSERT(rjq__timers_peek(&h) == &a);
    rjq__timers_free(&h);
}

TEST(timer_del_idle_is_noop) {
    rjq__timer t[5], idle;
    rjq__timers h = {0};
    rjq__timer_init(&idle, noop_fn, NULL);
    rjq__timers_del(&h, &idle); /* empty heap, never armed */
    ASSERT_EQ(0, h.n);
    for (int i = 0; i < 5; i++) {
        rjq__timer_init(&t[i], noop_fn, NULL);
        ASSERT_EQ(0, rjq__timers_add(&h, &t[i], (uint64_t)(50 - i * 10)));
    }
    rjq__timer *before[5];
    memcpy(before, h.heap, sizeof before);
    rjq__timers_del(&h, &idle);
    ASSERT_EQ(5, h.n);
    ASSERT(memcmp(before, h.heap, sizeof before) == 0);
    ASSERT(!rjq__timer_armed(&idle));
    check_heap(&h);
    /* Deleting twice: the second is a no-op. */
    rjq__timers_del(&h, &t[2]);
    ASSERT(!rjq__timer_armed(&t[2]));
    ASSERT_EQ(4, h.n);
    memcpy(before, h.heap, 4 * sizeof before[0]);
    rjq__timers_del(&h, &t[2]);
    ASSERT_EQ(4, h.n);
    ASSERT(memcmp(before, h.heap, 4 * sizeof before[0]) == 0);
    check_heap(&h);
    /* Deleting the root and the last slot. */
    rjq__timer *root = rjq__timers_peek(&h);
    ASSERT(root == &t[4]);
    rjq__timers_del(&h, root);
    check_heap(&h);
    rjq__timers_del(&h, h.heap[h.n - 1]);
    check_heap(&h);
    ASSERT_EQ(2, h.n);
    rjq__timers_free(&h);
}

TEST(timer_rearm_moves) {
    rjq__timer t[8];
    rjq__timers h = {0};
    for (int i = 0; i < 8; i++) {
        rjq__timer_init(&t[i], noop_fn, NULL);
        ASSERT_EQ(0, rjq__timers_add(&h, &t[i], (uint64_t)(100 + i * 100)));
    }
    ASSERT(rjq__timers_peek(&h) == &t[0]);
    /* Later: the last one moves to the front. */
    ASSERT_EQ(0, rjq__timers_add(&h, &t[7], 50));
    ASSERT_EQ(8, h.n); /* re-arm does not add a second entry */
    ASSERT(rjq__timers_peek(&h) == &t[7]);
    check_heap(&h);
    /* Later: the front one moves behind everything. */
    ASSERT_EQ(0, rjq__timers_add(&h, &t[7], 10000));
    ASSERT(rjq__timers_peek(&h) == &t[0]);
    ASSERT_EQ(0, rjq__timers_add(&h, &t[0], 20000));
    ASSERT(rjq__timers_peek(&h) == &t[1]);
    check_heap(&h);
    /* Same due: stays armed, same count. */
    ASSERT_EQ(0, rjq__timers_add(&h, &t[3], 400));
    ASSERT_EQ(8, h.n);
    check_heap(&h);
    /* Pop order reflects the moves. */
    int order[8] = {1, 2, 3, 4, 5, 6, 7, 0};
    for (int k = 0; k < 8; k++) {
        rjq__timer *p = rjq__timers_pop_due(&h, UINT64_MAX);
        ASSERT(p == &t[order[k]]);
        check_heap(&h);
    }
    ASSERT_EQ(0, h.n);
    rjq__timers_free(&h);
}

TEST(timer_free_leaves_idle) {
    enum { N = 100 }; /* past the initial capacity: the heap grows */
    rjq__timer t[N];
    rjq__timers h = {0};
    for (int i = 0; i < N; i++) {
        rjq__timer_init(&t[i], noop_fn, NULL);
        ASSERT_EQ(0, rjq__timers_add(&h, &t[i], (uint64_t)((i * 37) % N)));
    }
    check_heap(&h);
    ASSERT_EQ(N, h.n);
    rjq__timers_free(&h);
    ASSERT(h.heap == NULL);
    ASSERT_EQ(0, h.n);
    ASSERT_EQ(0, h.cap);
    for (int i = 0; i < N; i++) ASSERT(!rjq__timer_armed(&t[i]));
    /* Stopping a timer after the free is harmless... */
    rjq__timers_del(&h, &t[5]);
    ASSERT_EQ(0, h.n);
    /* ...and the heap can be used again. */
    ASSERT_EQ(0, rjq__timers_add(&h, &t[5], 7));
    ASSERT(rjq__timers_peek(&h) == &t[5]);
    rjq__timers_free(&h);
    ASSERT(!rjq__timer_armed(&t[5]));
    rjq__timers_free(&h); /* twice is fine */
}

static void noop_timer(rjq__timer *t) {
    (void)t;
}

/* Owners reserve their timers' heap slots when they are created, so that
 * arming later (the reconnect delay, a worker's poll) cannot fail: a timer
 * that failed to arm used to be ignored, and a connection could stay down
 * for good. With every allocation failing, the reserved timers still arm;
 * one beyond the reservation is refused. */
TEST(arming_reserved_timers_never_allocates) {
    rjq__timers h = {0};
    enum { N = 40 };
    rjq__timer t[N];
    for (int i = 0; i < N; i++) rjq__timer_init(&t[i], noop_timer, NULL);
    for (int i = 0; i < N; i++) ASSERT_EQ(0, rjq__timers_reserve(&h, 1));
    failalloc_arm_from(0);
    for (int i = 0; i < N; i++) ASSERT_EQ(0, rjq__timers_add(&h, &t[i], (uint64_t)(N - i)));
    for (int i = 0; i < N; i++) ASSERT_EQ(0, rjq__timers_add(&h, &t[i], (uint64_t)i)); /* re-arm */
    failalloc_disarm();
    ASSERT_EQ(0, failalloc_count()); /* not one allocation was tried */
    ASSERT(rjq__timers_peek(&h) == &t[0]);
    for (int i = 0; i < N; i++) rjq__timers_del(&h, &t[i]);
    rjq__timers_unreserve(&h, N);
    ASSERT_EQ(0, (long)h.reserved);
    /* A failed reservation reserves nothing. */
    failalloc_arm_from(0);
    int rc = rjq__timers_reserve(&h, 1000);
    failalloc_disarm();
    ASSERT_EQ(-1, rc);
    ASSERT_EQ(0, (long)h.reserved);
    rjq__timers_free(&h);
}
