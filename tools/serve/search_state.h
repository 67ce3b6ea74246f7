/*
 * rjq serve: a payload search's own logic (search_state.c), apart from
 * Redis and HTTP so that a unit test drives it (tests/unit_search.c): the
 * states asked for, the matches kept (each id once, at most max), the
 * progress over a queue's shards, and when the scan is over.
 */
#ifndef RJQ_TOOLS_SERVE_SEARCH_STATE_H
#define RJQ_TOOLS_SERVE_SEARCH_STATE_H

#include <stddef.h>

#include "rjq.h"

#define SEARCH_STATES_ALL 0x7fu /* one bit per rjq_job_state */

typedef struct search_match {
    char *id;
    int state;             /* an rjq_job_state */
    int shard;             /* the shard it was found on (0: a plain queue) */
} search_match;

typedef struct search_state {
    unsigned states;       /* the states searched: bit (1 << rjq_job_state) */
    size_t max;            /* matches kept at most; the scan stops there */
    int nshards, shard;    /* the queue's shards (1: a plain queue); the one scanned */
    char cursor[24];       /* where the next step starts on that shard */
    long long scanned;     /* payloads read, every shard */
    long long shard_total[RJQ_SHARDS_MAX]; /* each shard's jobs at its last step (-1: not reached) */
    long steps;
    int done;              /* the scan is over (every shard, or max matches) */
    int truncated;         /* it stopped at max matches */
    search_match *m;
    size_t n, cap;
    /* the ids kept, for each id once (open addressing; HSCAN may give one twice) */
    size_t *slot;          /* index + 1 into m, 0: empty */
    size_t nslots;
} search_state;

/* Parse a comma-separated list of state names ("ready,dead"; NULL or "":
 * all of them) into *mask. 0, or -1 for an unknown name. */
int search_states_parse(const char *list, unsigned *mask);
/* The state's bit, or 0 for a name that is none. */
unsigned search_state_bit(const char *name);
/* A new search of nshards shards keeping at most max matches. 0, or -1
 * out of memory. */
int search_state_init(search_state *st, unsigned states, size_t max, int nshards);
void search_state_free(search_state *st);
/* One step's reply on the shard st->shard: next cursor, payloads read,
 * that shard's jobs, the step's matches. Keeps the matches of the states
 * asked for (each id of a shard once), moves to the next shard when the
 * cursor is "0", and sets done. 0, or -1 out of memory (nothing kept of
 * the step beyond what fit). */
int search_state_step(search_state *st, const char *cursor, long long scanned, long long total,
                      const rjq_search_match *m, size_t n);
/* The jobs of the shards reached so far (a shard not reached yet counts
 * as nothing until its first step). */
long long search_state_total(const search_state *st);

#endif
