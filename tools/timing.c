/* Job timings from events: see timing.h. */
#include "timing.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const double timing_bounds[TIMING_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                              0.1,   0.25,   0.5,   1,    2.5,   5,
                                              10,    30,     60,    300,  900};

struct timing_entry {
    const void *owner;
    long long enq_ms;   /* 0: not seen */
    long long start_ms; /* 0: not running (as far as seen) */
    long long seen_ms;
    int started;        /* a start was seen: later ones are not waits */
    timing_entry *next;
    char id[];
};

void timing_observe(timing_hist *h, double seconds) {
    size_t i = 0;
    if (seconds < 0) seconds = 0; /* clocks of two scripts a millisecond apart */
    while (i < TIMING_BUCKETS && seconds > timing_bounds[i]) i++;
    h->le[i]++;
    h->count++;
    h->sum += seconds;
}

double timing_quantile(const timing_hist *h, double q) {
    if (h->count == 0) return -1;
    double want = q * (double)h->count;
    unsigned long long cum = 0;
    for (size_t i = 0; i < TIMING_BUCKETS; i++) {
        cum += h->le[i];
        if ((double)cum >= want) return timing_bounds[i];
    }
    return INFINITY;
}

int timing_map_init(timing_map *m, size_t max) {
    memset(m, 0, sizeof *m);
    m->nbuckets = 4096;
    while (m->nbuckets < max / 2) m->nbuckets *= 2;
    m->buckets = calloc(m->nbuckets, sizeof *m->buckets);
    m->max = max;
    return m->buckets ? 0 : -1;
}

void timing_map_free(timing_map *m) {
    for (size_t b = 0; m->buckets && b < m->nbuckets; b++)
        while (m->buckets[b]) {
            timing_entry *e = m->buckets[b];
            m->buckets[b] = e->next;
            free(e);
        }
    free(m->buckets);
    m->buckets = NULL;
    m->n = 0;
}

static size_t slot(const timing_map *m, const void *owner, const char *id) {
    size_t h = (size_t)(uintptr_t)owner * 31u;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) h = h * 33u ^ *p;
    return h & (m->nbuckets - 1);
}

/* The entry's link in its chain (NULL when absent). */
static timing_entry **find(timing_map *m, const void *owner, const char *id) {
    timing_entry **p = &m->buckets[slot(m, owner, id)];
    for (; *p; p = &(*p)->next)
        if ((*p)->owner == owner && strcmp((*p)->id, id) == 0) return p;
    return NULL;
}

static timing_entry *add(timing_map *m, const void *owner, const char *id) {
    if (m->n >= m->max) {
        m->dropped++;
        return NULL;
    }
    size_t len = strlen(id);
    timing_entry *e = calloc(1, sizeof *e + len + 1);
    if (e == NULL) return NULL;
    memcpy(e->id, id, len + 1);
    e->owner = owner;
    size_t b = slot(m, owner, id);
    e->next = m->buckets[b];
    m->buckets[b] = e;
    m->n++;
    return e;
}

static void unlink_entry(timing_map *m, timing_entry **link) {
    timing_entry *e = *link;
    *link = e->next;
    free(e);
    m->n--;
}

void timing_event(timing_map *m, const void *owner, const char *event, const char *id,
                  long long t_ms, double *wait_s, double *run_s) {
    *wait_s = *run_s = -1;
    if (id == NULL || id[0] == '\0' || t_ms <= 0) return;
    timing_entry **link = find(m, owner, id);
    timing_entry *e = link ? *link : NULL;
    if (strcmp(event, "enqueued") == 0) {
        if (e == NULL && (e = add(m, owner, id)) == NULL) return;
        e->enq_ms = t_ms; /* an id used again starts over */
        e->start_ms = 0;
        e->started = 0;
    } else if (strcmp(event, "active") == 0) {
        if (e == NULL && (e = add(m, owner, id)) == NULL) return;
        if (e->enq_ms && !e->started) *wait_s = (double)(t_ms - e->enq_ms) / 1000.0;
        e->started = 1;
        e->start_ms = t_ms;
    } else if (strcmp(event, "completed") == 0 || strcmp(event, "failed") == 0) {
        if (e && e->start_ms) *run_s = (double)(t_ms - e->start_ms) / 1000.0;
        if (e) e->start_ms = 0;
        if (e && event[0] == 'c') {
            unlink_entry(m, link);
            return;
        }
    } else if (strcmp(event, "dead") == 0 || strcmp(event, "cancelled") == 0) {
        if (e) unlink_entry(m, link); /* final */
        return;
    } else if (strcmp(event, "reclaimed") == 0 || strcmp(event, "released") == 0) {
        if (e) e->start_ms = 0; /* that run ended without an outcome */
    }
    if (e) e->seen_ms = t_ms;
}

void timing_queue_event_of(timing_map *m, const void *owner, timing_queue *q, const char *event,
                           const char *id, long long t_ms) {
    double wait_s, run_s;
    timing_event(m, owner, event, id, t_ms, &wait_s, &run_s);
    if (wait_s >= 0) timing_observe(&q->wait, wait_s);
    if (run_s >= 0) timing_observe(&q->run, run_s);
}

void timing_queue_event(timing_map *m, timing_queue *q, const char *event, const char *id,
                        long long t_ms) {
    timing_queue_event_of(m, q, q, event, id, t_ms);
}

static double mean_ms(const timing_hist *h, const timing_hist *seen) {
    unsigned long long n = h->count - seen->count;
    return n ? (h->sum - seen->sum) * 1000.0 / (double)n : -1;
}

void timing_queue_means(timing_queue *q, double *wait_ms, double *run_ms) {
    *wait_ms = mean_ms(&q->wait, &q->wait_seen);
    *run_ms = mean_ms(&q->run, &q->run_seen);
    q->wait_seen = q->wait;
    q->run_seen = q->run;
}

void timing_forget_owner(timing_map *m, const void *owner) {
    for (size_t b = 0; b < m->nbuckets; b++)
        for (timing_entry **p = &m->buckets[b]; *p;)
            if ((*p)->owner == owner) unlink_entry(m, p);
            else p = &(*p)->next;
}

void timing_sweep(timing_map *m, long long now_ms, long long max_age_ms) {
    for (size_t b = 0; b < m->nbuckets; b++)
        for (timing_entry **p = &m->buckets[b]; *p;)
            if ((*p)->seen_ms < now_ms - max_age_ms) unlink_entry(m, p);
            else p = &(*p)->next;
}

void timing_sweep_now(timing_map *m) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    timing_sweep(m, (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, TIMING_MAX_AGE_MS);
}
