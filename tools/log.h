/*
 * The log lines of the long-running tools (rjq serve, rjq-pg-bridge) on
 * stderr, in one of two formats (--log-format):
 *   text  "PREFIX: MESSAGE key=value ..." (PREFIX as log_init set it, with
 *         the time first when it asked for it)
 *   json  one object per line: {"time": "2026-01-02T03:04:05.678Z",
 *         "level": "info", "message": MESSAGE, then each field as a member}
 * Usage errors before the tool runs stay plain text.
 */
#ifndef RJQ_TOOLS_LOG_H
#define RJQ_TOOLS_LOG_H

#include <stddef.h>

typedef enum { LOG_TEXT, LOG_JSON } log_format;

/* "text" or "json" into *out: 0, or -1 for another name. */
int log_format_parse(const char *name, log_format *out);

/* The format and the text lines' prefix (kept, not copied); time_in_text:
 * text lines start with the time too. */
void log_init(log_format f, const char *prefix, int time_in_text);
log_format log_get_format(void);

/* A field of a line: a string (NULL: JSON null, "-" in text), an integer
 * or a number. */
enum { LOGF_STR, LOGF_INT, LOGF_NUM };
typedef struct log_field {
    const char *key;
    int kind;
    const char *s;
    long long i;
    double d;
} log_field;
#define LOGF_S(k, v) ((log_field){(k), LOGF_STR, (v), 0, 0})
#define LOGF_I(k, v) ((log_field){(k), LOGF_INT, NULL, (v), 0})
#define LOGF_N(k, v) ((log_field){(k), LOGF_NUM, NULL, 0, (v)})

/* One line at level ("info", "warn", "error") with n fields, written with
 * one write. */
void log_line(const char *level, const log_field *f, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
