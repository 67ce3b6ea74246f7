/* The early-outcome list (await_early.h). */
#include "await_early.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

void rjq__early_free(rjq__early *e) {
    free(e->key);
    free(e->kind);
    free(e->body);
    free(e);
}

static void pop_oldest(rjq__early_list *l) {
    rjq__early *e = l->head;
    RJQ_ASSERT(e != NULL && l->n > 0);
    l->head = e->next;
    if (l->head == NULL) l->tail = NULL;
    l->n--;
    rjq__early_free(e);
}

void rjq__early_keep(rjq__early_list *l, const char *key, size_t klen, const char *kind,
                     const char *body, size_t blen) {
    rjq__early *e = calloc(1, sizeof *e);
    if (e == NULL) {
        l->dropped++;
        return;
    }
    e->key = strndup(key, klen);
    e->kind = strdup(kind);
    e->body = malloc(blen + 1);
    if (e->key == NULL || e->kind == NULL || e->body == NULL) {
        rjq__early_free(e);
        l->dropped++;
        return;
    }
    memcpy(e->body, body, blen);
    e->body[blen] = '\0';
    e->len = blen;
    if (l->tail) l->tail->next = e;
    else l->head = e;
    l->tail = e;
    if (++l->n > RJQ__EARLY_MAX) {
        pop_oldest(l);
        l->dropped++;
    }
    RJQ_ASSERT(l->n <= RJQ__EARLY_MAX && l->head != NULL && l->tail == e);
}

rjq__early *rjq__early_take(rjq__early_list *l, const char *key) {
    rjq__early *prev = NULL;
    for (rjq__early *e = l->head; e; prev = e, e = e->next) {
        if (strcmp(e->key, key) != 0) continue;
        if (prev) prev->next = e->next;
        else l->head = e->next;
        if (l->tail == e) l->tail = prev;
        RJQ_ASSERT(l->n > 0);
        l->n--;
        e->next = NULL;
        return e;
    }
    return NULL;
}

void rjq__early_clear(rjq__early_list *l) {
    while (l->head) pop_oldest(l);
    RJQ_ASSERT(l->n == 0 && l->tail == NULL);
}
