/*
 * Job headers (rjq_job_options.headers): the checks of what a producer
 * gives, the text they travel and are stored as, and that text read back
 * (a leaf: no Redis, unit-tested in tests/unit_headers.c).
 *
 * The text: each header "key=value", joined by '\n' (keys of
 * [A-Za-z0-9_.-], values printable ASCII: neither holds a '\n', a key no
 * '='). The options column keeps it after the job's options text and a
 * '\n' (docs/scripts.md, "Job headers"); claim replies and push messages
 * carry it as it is stored.
 */
#ifndef RJQ_HEADERS_H
#define RJQ_HEADERS_H

#include <stddef.h>

#include "rjq.h"

/* h[0..n) as rjq.h allows them (RJQ_HEADERS_MAX, key and value limits,
 * each key once): RJQ_OK or RJQ_EINVAL (why, whylen bytes, says what). */
int rjq__headers_check(const rjq_header *h, size_t n, char *why, size_t whylen);

/* The bytes of h[0..n)'s text (checked headers), without a NUL. */
size_t rjq__headers_text_len(const rjq_header *h, size_t n);
/* Write that text at out (rjq__headers_text_len bytes; no NUL). */
void rjq__headers_text(const rjq_header *h, size_t n, char *out);

/* A job's headers o->headers/o->nheaders before its options are sent:
 * RJQ_OK when it has none or they pass rjq__headers_check, else
 * RJQ_EINVAL (why says what). With headers, an empty options text opts
 * (RJQ__OPTS_MAX bytes) is spelt out as the defaults, so that their text
 * has options to follow. */
int rjq__headers_options_check(const rjq_job_options *o, char *opts, char *why, size_t whylen);

/* The options argument of a job with headers: opts, '\n', then h[0..n)'s
 * text, in one allocation (free() it) of *len bytes (no NUL), or NULL
 * (out of memory). */
char *rjq__headers_options_text(const char *opts, const rjq_header *h, size_t n, size_t *len);

/* A copy of checked h[0..n) in one allocation (free() it), or NULL (out
 * of memory; n 0 gives NULL too). */
rjq_header *rjq__headers_dup(const rjq_header *h, size_t n);

/* Headers read back from text (len bytes, as received: never trusted):
 * one allocation holding the array and its strings (free() it), with *n
 * its entries. A line that is no valid header (or past RJQ_HEADERS_MAX,
 * or a key seen before) is skipped. NULL with *n 0 when none is valid or
 * out of memory (*oom set to 1 then, when oom is not NULL). */
rjq_header *rjq__headers_read(const char *text, size_t len, size_t *n, int *oom);

#endif /* RJQ_HEADERS_H */
