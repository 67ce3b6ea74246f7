/* Reply objects in few blocks (replyarena.h). */
#include "replyarena.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"

#define ALIGN 16u                  /* every object's alignment in a block */
#define BLOCK_MIN 4096u            /* a further block's least size */
#define FIRST_MAX (64u << 10)      /* the first block's room for elements, at most */
#define ELEMENT_ROOM 48u           /* room per element guessed for the first block: */
                                   /* its object and a short string */

typedef struct block {
    struct block *next;
} block;

typedef struct big {              /* a string with its own allocation */
    struct big *next;
    redisReply *r;
} big;

/* What the root reply heads: its blocks (the first is this one) and its
 * big strings. */
typedef struct arena {
    block *more;                  /* blocks after the first */
    char *at, *end;               /* free room in the newest block */
    big *bigs;
} arena;

typedef struct head {
    arena a;
    redisReply root;
} head;

static size_t up(size_t n) {
    return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

static arena *arena_of(redisReply *root) {
    return &((head *)((char *)root - offsetof(head, root)))->a;
}

/* n bytes in a's blocks (aligned), NULL out of memory. */
static void *take(arena *a, size_t n) {
    n = up(n);
    if ((size_t)(a->end - a->at) < n) {
        size_t room = n > BLOCK_MIN ? n : BLOCK_MIN;
        if (room > SIZE_MAX - up(sizeof(block))) return NULL;
        block *b = malloc(up(sizeof(block)) + room);
        if (b == NULL) return NULL;
        b->next = a->more;
        a->more = b;
        a->at = (char *)b + up(sizeof(block));
        a->end = a->at + room;
    }
    void *p = a->at;
    a->at += n;
    return p;
}

/* The arena of task's reply: r's own (the root's object), or its root
 * task's (whose object is set before its elements). */
static arena *arena_of_task(const redisReadTask *task, redisReply *r) {
    const redisReadTask *t = task;
    if (t->parent == NULL) return arena_of(r);
    while (t->parent) t = t->parent;
    return arena_of(t->obj);
}

/* A new object of task's reply: the root (a block of its own with `room`
 * bytes more, for its elements) or an element linked into its parent. */
static void free_object(void *p);

static redisReply *new_object(const redisReadTask *task, int type, size_t room) {
    redisReply *r;
    if (task->parent == NULL) {
        size_t first = up(sizeof(head));
        if (room > SIZE_MAX - first) return NULL;
        head *h = malloc(first + room);
        if (h == NULL) return NULL;
        h->a.more = NULL;
        h->a.bigs = NULL;
        h->a.at = (char *)h + first;
        h->a.end = h->a.at + room;
        r = &h->root;
    } else {
        if ((r = take(arena_of_task(task, NULL), sizeof *r)) == NULL) return NULL;
    }
    memset(r, 0, sizeof *r);
    r->type = type;
    if (task->parent) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
    return r;
}

static void *create_string(const redisReadTask *task, char *str, size_t len) {
    int own = len >= RJQ__REPLY_OWN_MIN;
    if (len >= SIZE_MAX - 2 * ALIGN) return NULL;
    /* (a root's room: its string, or the record of a big one) */
    redisReply *r = new_object(task, task->type,
                               task->parent ? 0 : own ? up(sizeof(big)) : up(len + 1));
    if (r == NULL) return NULL;
    arena *a = arena_of_task(task, r);
    char *s;
    if (own) {
        big *b = take(a, sizeof *b);
        s = b ? rjq__hi_malloc(len + 1) : NULL;
        if (s) {
            b->r = r;
            b->next = a->bigs;
            a->bigs = b;
        }
    } else {
        s = take(a, len + 1);
    }
    if (s == NULL) { /* (an element's root is freed by hiredis, a root here) */
        if (task->parent == NULL) free_object(r);
        return NULL;
    }
    if (len) memcpy(s, str, len);
    s[len] = '\0';
    r->str = s;
    r->len = len;
    return r;
}

#if RJQ_HIREDIS_AT_LEAST(1, 0)
static void *create_array(const redisReadTask *task, size_t n) {
#else
static void *create_array(const redisReadTask *task, int elements) {
    size_t n = elements > 0 ? (size_t)elements : 0;
#endif
    if (n > (SIZE_MAX / 2) / (sizeof(redisReply *) + ELEMENT_ROOM)) return NULL;
    size_t guess = n * ELEMENT_ROOM < FIRST_MAX ? n * ELEMENT_ROOM : FIRST_MAX;
    size_t room = task->parent ? 0 : up(n * sizeof(redisReply *)) + guess;
    redisReply *r = new_object(task, task->type, room);
    if (r == NULL) return NULL;
    if (n > 0) {
        arena *a = arena_of_task(task, r);
        if ((r->element = take(a, n * sizeof(redisReply *))) == NULL) {
            if (task->parent == NULL) free_object(r);
            return NULL;
        }
        memset(r->element, 0, n * sizeof(redisReply *));
    }
    r->elements = n;
    return r;
}

static void *create_integer(const redisReadTask *task, long long value) {
    redisReply *r = new_object(task, REDIS_REPLY_INTEGER, 0);
    if (r) r->integer = value;
    return r;
}

static void *create_nil(const redisReadTask *task) {
    return new_object(task, REDIS_REPLY_NIL, 0);
}

#if RJQ_HIREDIS_AT_LEAST(1, 0)
/* (RESP3 types: rjq speaks RESP2, but a reader may meet them) */
static void *create_double(const redisReadTask *task, double value, char *str, size_t len) {
    redisReply *r = create_string(task, str, len);
    if (r) {
        r->type = REDIS_REPLY_DOUBLE;
        r->dval = value;
    }
    return r;
}

static void *create_bool(const redisReadTask *task, int bval) {
    redisReply *r = new_object(task, REDIS_REPLY_BOOL, 0);
    if (r) r->integer = bval != 0;
    return r;
}
#endif

/* Free a root reply (hiredis frees nothing else): its big strings not
 * taken over, its blocks. */
static void free_object(void *p) {
    if (p == NULL) return;
    arena *a = arena_of(p);
    for (big *b = a->bigs; b; b = b->next)
        if (b->r->str) rjq__hi_free(b->r->str);
    block *k = a->more;
    while (k) {
        block *next = k->next;
        free(k);
        k = next;
    }
    free((char *)p - offsetof(head, root));
}

static redisReplyObjectFunctions functions = {
    .createString = create_string,
    .createArray = create_array,
    .createInteger = create_integer,
#if RJQ_HIREDIS_AT_LEAST(1, 0)
    .createDouble = create_double,
    .createBool = create_bool,
#endif
    .createNil = create_nil,
    .freeObject = free_object,
};

void rjq__reply_arena_use(redisContext *c) {
    if (c && c->reader) c->reader->fn = &functions;
}

char *rjq__reply_take_str(redisReply *r) {
    if (r == NULL || r->type != REDIS_REPLY_STRING || r->str == NULL || r->len < RJQ__REPLY_OWN_MIN)
        return NULL;
    char *s = r->str;
    r->str = NULL;
    r->len = 0;
    return s;
}
