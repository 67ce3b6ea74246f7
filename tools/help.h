/* The rjq tool's help: the overview (`rjq help`) and each command's
 * usage, options and an example (`rjq help COMMAND`, `rjq COMMAND --help`). */
#ifndef RJQ_TOOLS_HELP_H
#define RJQ_TOOLS_HELP_H

#include <stdio.h>

/* The overview: the global options and the list of commands. */
void help_overview(FILE *out);

/* One command's help. Returns 0, or -1 when there is no such command. */
int help_command(FILE *out, const char *name);

#endif
