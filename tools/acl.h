/*
 * `rjq acl`: the ACL SETUSER lines of rjq's three roles (and of rjq-pg-bridge), with exactly the
 * commands, keys and channels each needs (tools/acl.c says which and why).
 */
#ifndef RJQ_TOOL_ACL_H
#define RJQ_TOOL_ACL_H

#include <stdio.h>

/* The roles, for acl_print's `role`. */
#define RJQ_ACL_PRODUCER 1
#define RJQ_ACL_WORKER 2
#define RJQ_ACL_MONITOR 4
#define RJQ_ACL_ALL 7     /* the three above */
#define RJQ_ACL_BRIDGE 8  /* rjq-pg-bridge (printed when asked for only) */

/* Print the lines of the roles in `roles` for key prefix `prefix` and the
 * queues matching the glob `queues`. Returns 0, or -1 when prefix or
 * queues cannot go into an ACL rule (a space, '{', '}' or a control
 * character), with the reason in why. */
int acl_print(FILE *out, const char *prefix, const char *queues, int roles, char *why,
              size_t whylen);

#endif
