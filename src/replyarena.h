/*
 * Reply objects in few blocks (issue 36, "Client"): hiredis' reader makes
 * every element of a reply with its own allocation (a claim reply of 25
 * jobs: ~150 callocs and mallocs, as many frees), which was a third of a
 * worker's instructions per drained job. These reply functions put a
 * reply's objects and short strings in blocks of its own, freed together;
 * strings of RJQ__REPLY_OWN_MIN bytes or more keep their own allocation,
 * so they can be taken over (rjq__reply_take_str). The redisReply objects
 * are hiredis' own layout: readers see no difference. A leaf: hiredis
 * only. Only roots are ever freed (hiredis frees nothing else).
 */
#ifndef RJQ_REPLYARENA_H
#define RJQ_REPLYARENA_H

#include <hiredis/hiredis.h>

#define RJQ__REPLY_OWN_MIN 512

/* Make the context's reader build its replies so. */
void rjq__reply_arena_use(redisContext *c);

/* Take over string reply r's bytes (NUL-ended; free them with
 * rjq__hi_free, compat.h): r->str becomes NULL and r->len 0. NULL when
 * they cannot be taken (not a string, or shorter than RJQ__REPLY_OWN_MIN:
 * copy them). Works on replies of either kind (hiredis' default objects
 * have every string in its own allocation). */
char *rjq__reply_take_str(redisReply *r);

#endif
