/*
 * rjq serve: a payload search's own logic (search_state.h).
 */
#include "search_state.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "statsfmt.h"

unsigned search_state_bit(const char *name) {
    rjq_job_state st;
    return job_state_parse(name, &st) == 0 ? 1u << st : 0;
}

int search_states_parse(const char *list, unsigned *mask) {
    *mask = 0;
    if (list == NULL || *list == '\0') {
        *mask = SEARCH_STATES_ALL;
        return 0;
    }
    while (*list) {
        size_t len = strcspn(list, ",");
        char w[16];
        if (len == 0 || len >= sizeof w) return -1;
        memcpy(w, list, len);
        w[len] = '\0';
        unsigned b = search_state_bit(w);
        if (b == 0) return -1;
        *mask |= b;
        list += len;
        if (*list == ',' && *++list == '\0') return -1; /* a trailing comma */
    }
    return 0;
}

int search_state_init(search_state *st, unsigned states, size_t max, int nshards) {
    memset(st, 0, sizeof *st);
    st->states = states;
    st->max = max;
    st->nshards = nshards < 1 ? 1 : nshards > RJQ_SHARDS_MAX ? RJQ_SHARDS_MAX : nshards;
    strcpy(st->cursor, "0");
    for (int i = 0; i < RJQ_SHARDS_MAX; i++) st->shard_total[i] = -1;
    st->nslots = 64;
    while (st->nslots < 2 * max + 2 && st->nslots < ((size_t)1 << 30)) st->nslots *= 2;
    st->slot = calloc(st->nslots, sizeof *st->slot);
    return st->slot ? 0 : -1;
}

void search_state_free(search_state *st) {
    for (size_t i = 0; i < st->n; i++) free(st->m[i].id);
    free(st->m);
    free(st->slot);
    memset(st, 0, sizeof *st);
}

static size_t hash(const char *s, int shard) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)shard;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

/* The slot of (id, shard): where it is, or the empty one it would take. */
static size_t *find(search_state *st, const char *id, int shard) {
    size_t i = hash(id, shard) & (st->nslots - 1);
    for (;;) {
        size_t *p = &st->slot[i];
        if (*p == 0) return p;
        const search_match *m = &st->m[*p - 1];
        if (m->shard == shard && strcmp(m->id, id) == 0) return p;
        i = (i + 1) & (st->nslots - 1);
    }
}

int search_state_step(search_state *st, const char *cursor, long long scanned, long long total,
                      const rjq_search_match *m, size_t n) {
    int rc = 0;
    st->steps++;
    st->scanned += scanned;
    st->shard_total[st->shard] = total;
    for (size_t i = 0; i < n && !st->truncated; i++) {
        unsigned b = search_state_bit(rjq_search_match_get(m, i)->state);
        if ((b & st->states) == 0) continue;
        size_t *p = find(st, rjq_search_match_get(m, i)->id, st->shard);
        if (*p) continue; /* seen before (HSCAN gives an entry twice when the hash grew) */
        if (st->n == st->max) {
            st->truncated = 1;
            break;
        }
        if (st->n == st->cap) {
            size_t cap = st->cap ? st->cap * 2 : 16;
            if (cap > st->max) cap = st->max;
            search_match *v = realloc(st->m, cap * sizeof *v);
            if (v == NULL) { rc = -1; break; }
            st->m = v;
            st->cap = cap;
        }
        char *id = strdup(rjq_search_match_get(m, i)->id);
        if (id == NULL) { rc = -1; break; }
        int state = 0;
        while (!(b & 1u)) { b >>= 1; state++; }
        st->m[st->n] = (search_match){id, state, st->shard};
        *p = ++st->n;
    }
    if (strcmp(cursor, "0") == 0) {
        if (st->shard + 1 < st->nshards) st->shard++;
        else st->done = 1;
        strcpy(st->cursor, "0");
    } else {
        size_t len = strlen(cursor);
        if (len >= sizeof st->cursor) len = sizeof st->cursor - 1; /* (20 digits at most: rjq.h) */
        memcpy(st->cursor, cursor, len);
        st->cursor[len] = '\0';
    }
    if (st->truncated) st->done = 1;
    return rc;
}

long long search_state_total(const search_state *st) {
    long long t = 0;
    for (int i = 0; i < st->nshards; i++)
        if (st->shard_total[i] > 0) t += st->shard_total[i];
    return t;
}
