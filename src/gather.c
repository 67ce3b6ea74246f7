/* Requests gathered for one call (gather.h). */
#include "gather.h"

void rjq__gather_init(rjq__gather_list *l) {
    l->head = NULL;
    l->end = &l->head;
}

void rjq__gather_append(rjq__gather_list *l, rjq__gather_link *x) {
    x->next = NULL;
    *l->end = x;
    l->end = &x->next;
}

rjq__gather_link *rjq__gather_pop(rjq__gather_list *l) {
    rjq__gather_link *x = l->head;
    if (x == NULL) return NULL;
    l->head = x->next;
    if (l->head == NULL) l->end = &l->head;
    x->next = NULL;
    return x;
}

size_t rjq__gather_count(const rjq__gather_list *l, rjq__gather_like_fn *like, size_t most) {
    size_t n = 0;
    for (const rjq__gather_link *x = l->head; x && n < most; x = x->next)
        if (like(x, l->head)) n++;
    return n;
}

void rjq__gather_take(rjq__gather_list *l, rjq__gather_like_fn *like, size_t n, void **out,
                      rjq__gather_link **lost) {
    const rjq__gather_link *first = l->head;
    rjq__gather_link **pp = &l->head, **lost_end = lost;
    *lost = NULL;
    for (size_t k = 0; *pp && k < n;) {
        rjq__gather_link *x = *pp;
        if (!like(x, first)) {
            pp = &x->next;
            continue;
        }
        *pp = x->next;
        x->next = NULL;
        if (out) {
            out[k] = x;
        } else {
            *lost_end = x;
            lost_end = &x->next;
        }
        k++;
    }
    if (*pp == NULL) l->end = pp; /* (its last was taken) */
}
