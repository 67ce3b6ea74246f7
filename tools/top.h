/*
 * rjq top: a live terminal view of every queue (top.c).
 */
#ifndef RJQ_TOOLS_TOP_H
#define RJQ_TOOLS_TOP_H

#include <event2/event.h>

#include "rjq.h"

/* Run the view on base until the user quits; frees c before returning
 * (its callbacks use the view's state). 0, or 1 / 2 (not a terminal)
 * with a message on stderr. */
int top_run(struct event_base *base, rjq_client *c, long interval_ms);

#endif
