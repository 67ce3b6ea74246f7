/* The timer heap (timer.h): pure, unit-tested. */
#include "timer.h"

#include <stdlib.h>

void rjq__timer_init(rjq__timer *t, rjq__timer_fn *fn, void *owner) {
    t->due = 0;
    t->idx = RJQ__TIMER_IDLE;
    t->fn = fn;
    t->owner = owner;
}

int rjq__timer_armed(const rjq__timer *t) {
    return t->idx != RJQ__TIMER_IDLE;
}

static void place(rjq__timers *h, size_t i, rjq__timer *t) {
    h->heap[i] = t;
    t->idx = i;
}

static void sift_up(rjq__timers *h, size_t i) {
    rjq__timer *t = h->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->heap[parent]->due <= t->due) break;
        place(h, i, h->heap[parent]);
        i = parent;
    }
    place(h, i, t);
}

static void sift_down(rjq__timers *h, size_t i) {
    rjq__timer *t = h->heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->n) break;
        if (child + 1 < h->n && h->heap[child + 1]->due < h->heap[child]->due)
            child++;
        if (t->due <= h->heap[child]->due) break;
        place(h, i, h->heap[child]);
        i = child;
    }
    place(h, i, t);
}

static int grow(rjq__timers *h, size_t need) {
    if (need <= h->cap) return 0;
    size_t cap = h->cap ? h->cap : 16;
    while (cap < need) cap *= 2;
    rjq__timer **heap = realloc(h->heap, cap * sizeof(*heap));
    if (heap == NULL) return -1;
    h->heap = heap;
    h->cap = cap;
    return 0;
}

int rjq__timers_reserve(rjq__timers *h, size_t n) {
    if (grow(h, h->reserved + n) != 0) return -1;
    h->reserved += n;
    return 0;
}

void rjq__timers_unreserve(rjq__timers *h, size_t n) {
    h->reserved = n < h->reserved ? h->reserved - n : 0;
}

int rjq__timers_add(rjq__timers *h, rjq__timer *t, uint64_t due) {
    if (rjq__timer_armed(t)) {
        uint64_t old = t->due;
        t->due = due;
        if (due < old) sift_up(h, t->idx);
        else sift_down(h, t->idx);
        return 0;
    }
    if (grow(h, h->n + 1) != 0) return -1;
    t->due = due;
    place(h, h->n++, t);
    sift_up(h, t->idx);
    return 0;
}

void rjq__timers_del(rjq__timers *h, rjq__timer *t) {
    size_t i = t->idx;
    if (i == RJQ__TIMER_IDLE) return;
    t->idx = RJQ__TIMER_IDLE;
    rjq__timer *last = h->heap[--h->n];
    if (last == t) return;
    place(h, i, last);
    if (i > 0 && h->heap[(i - 1) / 2]->due > last->due) sift_up(h, i);
    else sift_down(h, i);
}

rjq__timer *rjq__timers_peek(const rjq__timers *h) {
    return h->n ? h->heap[0] : NULL;
}

rjq__timer *rjq__timers_pop_due(rjq__timers *h, uint64_t now) {
    rjq__timer *t = rjq__timers_peek(h);
    if (t == NULL || t->due > now) return NULL;
    rjq__timers_del(h, t);
    return t;
}

void rjq__timers_free(rjq__timers *h) {
    for (size_t i = 0; i < h->n; i++) h->heap[i]->idx = RJQ__TIMER_IDLE;
    free(h->heap);
    h->heap = NULL;
    h->n = h->cap = h->reserved = 0;
}
