/*
 * The process registry, read side (processes.c): the parsing of its
 * reply, pure (for tests: tests/fuzz).
 */
#ifndef RJQ_PROCESSES_H
#define RJQ_PROCESSES_H

#include "core.h"

/* processes.lua's reply [server time, then per client: id, its entry's
 * end, its info text] into *list (n of them, in one block with their
 * queues, ids and texts: free() it). RJQ_OK, RJQ_EPROTO (a wrong shape, an
 * entry's end out of 0..RJQ__TIME_MAX) or RJQ_ENOMEM. Numbers of the info
 * text out of range read as 0; a queue lists RJQ_PROCESS_JOBS_MAX ids at
 * most. */
int rjq__processes_parse(const redisReply *r, rjq_process **list, size_t *n);

#endif /* RJQ_PROCESSES_H */
