/*
 * Queue event streams (monitor.c): the parsing of an event message's
 * lines, pure (for tests: unit_replies, tests/fuzz).
 */
#ifndef RJQ_MONITOR_H
#define RJQ_MONITOR_H

#include <stddef.h>

#include "rjq.h"

#define RJQ__EVENT_MAX 15 /* an event name's bytes */

/* One event line, "<event> <id> <server ms>" (ids have no spaces; "<event>
 * <id>" from an rjq before event times: time 0): 0 with ev, id and *time
 * set, or -1 when malformed (a name or id too long or with a NUL byte, a
 * time not a number in 0..RJQ__TIME_MAX). */
int rjq__event_parse(const char *msg, size_t len, char ev[RJQ__EVENT_MAX + 1],
                     char id[RJQ_JOB_ID_MAX + 1], long long *time);

#endif /* RJQ_MONITOR_H */
