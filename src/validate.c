/* Input checks and encodings that need no Redis: pure, unit-tested. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "validate.h"

/* ---- extensible structs (rjq.h "Extensible structs") -------------------- */

/* The maintainers' rule: no struct has tail padding, so every older
 * version's size ends exactly at its last field (a field added later never
 * falls into bytes an older caller left as padding, unset). */
#define RJQ__ENDS_AT_(type, last)                                                     \
    _Static_assert(offsetof(type, last) + sizeof(((type *)0)->last) == sizeof(type), \
                   #type " has tail padding: add an explicit int reserved")
RJQ__ENDS_AT_(rjq_loop_ops, unwatch_fd);
RJQ__ENDS_AT_(rjq_io_ops, resolve_cancel);
RJQ__ENDS_AT_(rjq_tls_options, reserved);
RJQ__ENDS_AT_(rjq_client_options, password);
RJQ__ENDS_AT_(rjq_queue_options, history_flush_ms);
RJQ__ENDS_AT_(rjq_job_options, group);
RJQ__ENDS_AT_(rjq_enqueue_item, opts);
RJQ__ENDS_AT_(rjq_worker_options, on_job_finish);
RJQ__ENDS_AT_(rjq_await_options, on_progress);
RJQ__ENDS_AT_(rjq_limits, rate_window_ms);
RJQ__ENDS_AT_(rjq_group_limits, max_waiting);
RJQ__ENDS_AT_(rjq_schedule, reserved);
RJQ__ENDS_AT_(rjq_batch_options, retention_ms);
RJQ__ENDS_AT_(rjq_flow_child, opts);

int rjq__sized_check(const void *src, size_t known, const char *what, char *why, size_t whylen) {
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size < sizeof(size_t) || size > RJQ__SIZED_MAX) {
        snprintf(why, whylen,
                 "%s: size %zu is not a size this library reads (initialise it with its "
                 "RJQ_..._INIT macro: rjq.h \"Extensible structs\")",
                 what, size);
        return RJQ_EINVAL;
    }
    if (size < known) return 1;
    const unsigned char *b = src;
    for (size_t i = known; i < size; i++) {
        if (b[i] != 0) {
            snprintf(why, whylen,
                     "%s: a field this library does not know is set (byte %zu of a struct of "
                     "%zu bytes; this library's has %zu): the program was built against a "
                     "newer rjq.h",
                     what, i, size, known);
            return RJQ_EINVAL;
        }
    }
    return RJQ_OK;
}

void rjq__sized_copy(void *dst, size_t known, const void *src) {
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size > known) size = known;
    memset(dst, 0, known);
    memcpy(dst, src, size);
    memcpy(dst, &known, sizeof known);
}

int rjq__sized_take(void *dst, size_t known, const void *src, const char *what, char *why,
                    size_t whylen) {
    int rc = rjq__sized_check(src, known, what, why, whylen);
    if (rc < 0) return rc;
    rjq__sized_copy(dst, known, src);
    return RJQ_OK;
}

/* Bytes allowed in names and ids: printable, no space; rjq's braces would
 * change the hash tag of every key, so queue names exclude them. */
static int name_byte_ok(unsigned char ch) {
    return ch > 0x20 && ch != 0x7f;
}

int rjq__valid_queue_name(const char *name) {
    if (name == NULL) return 0;
    size_t n = strlen(name);
    if (n == 0 || n > RJQ__QUEUE_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!name_byte_ok(ch) || ch == '{' || ch == '}') return 0;
    }
    return 1;
}

int rjq__valid_group_name(const char *g) {
    if (g == NULL) return 0;
    size_t n = strlen(g);
    if (n == 0 || n > RJQ_GROUP_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)g[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == ':' || ch == '@' || ch == '-'))
            return 0;
    }
    return 1;
}

int rjq__valid_job_id(const char *id) {
    if (id == NULL) return 0;
    size_t n = strlen(id);
    int digits = 1;
    if (n == 0 || n > RJQ_JOB_ID_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)id[i];
        if (!name_byte_ok(ch)) return 0;
        if (ch < '0' || ch > '9') digits = 0;
    }
    return !digits; /* all-digit ids are the server-assigned ones */
}

int rjq__valid_job_ref(const char *id) {
    if (id == NULL) return 0;
    size_t n = strlen(id);
    if (n == 0 || n > RJQ_JOB_ID_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_byte_ok((unsigned char)id[i])) return 0;
    return 1;
}

int rjq__valid_client_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 128) return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_byte_ok((unsigned char)name[i])) return 0;
    return 1;
}

/* v in decimal at p (no NUL); past its last digit. (snprintf cost a
 * producer more than all else it does per job: enqueue.c encodes every
 * job's options with this.) */
static char *put_ll(char *p, long long v) {
    char tmp[24];
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    int n = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *p++ = '-';
    while (n) *p++ = tmp[--n];
    return p;
}

/* The backoff's spec at buf (NUL-terminated; "" for the default); fits 64
 * bytes. */
static int backoff_spec(const rjq_backoff *b, char *buf) {
    long long base = b->base_ms ? b->base_ms : 1000;
    long long cap = b->max_ms ? b->max_ms : 3600000;
    if (base < 0 || cap < 0 || base > RJQ_DELAY_MAX || cap > RJQ_DELAY_MAX) return RJQ_EINVAL;
    char *p = buf;
    switch (b->type) {
    case RJQ_BACKOFF_DEFAULT:
    case RJQ_BACKOFF_EXPONENTIAL:
        if (b->type != RJQ_BACKOFF_DEFAULT || b->base_ms != 0 || b->max_ms != 0) {
            *p++ = 'e';
            *p++ = ',';
            p = put_ll(p, base);
            *p++ = ',';
            p = put_ll(p, cap);
        }
        *p = '\0';
        return RJQ_OK;
    case RJQ_BACKOFF_FIXED:
        *p++ = 'f';
        *p++ = ',';
        p = put_ll(p, base);
        memcpy(p, ",0", 3);
        return RJQ_OK;
    }
    return RJQ_EINVAL;
}

int rjq__encode_job_options(const rjq_job_options *o, char *buf) {
    char spec[64];
    buf[0] = '\0';
    if (o == NULL) return RJQ_OK;
    if (o->reserved != 0 || o->reserved2 != 0) return RJQ_EINVAL; /* (a later field, unknown here) */
    if (o->group != NULL) return RJQ_EINVAL; /* (groups.c takes it off first) */
    if (o->after != NULL || o->n_after != 0 || o->after_policy != 0)
        return RJQ_EINVAL; /* (dependencies: deps.c takes them off first) */
    if (o->delay_ms < 0 || o->delay_ms > RJQ_DELAY_MAX || o->priority < RJQ_PRIORITY_MIN ||
        o->priority > RJQ_PRIORITY_MAX || o->max_attempts < 0 || o->timeout_ms < 0 ||
        o->timeout_ms > RJQ_DELAY_MAX || o->dedup_ms < 0 || o->dedup_ms > RJQ_DELAY_MAX ||
        ((o->dedup_ms || o->debounce) && o->id == NULL))
        return RJQ_EINVAL;
    if (backoff_spec(&o->backoff, spec) != RJQ_OK) return RJQ_EINVAL;
    if (o->delay_ms == 0 && o->priority == 0 &&
        (o->max_attempts == 0 || o->max_attempts == 3) && spec[0] == '\0' && o->timeout_ms == 0 &&
        o->dedup_ms == 0 && !o->debounce)
        return RJQ_OK;
    /* "delay,priority,attempts,spec": at most 13 + 8 + 10 + 29 bytes and 3
     * commas (the ranges checked above), then ";timeout;dedup;1" as far as
     * needed (empty: none; 14 + 14 + 2 more): under RJQ__OPTS_MAX */
    char *p = buf;
    p = put_ll(p, o->delay_ms);
    *p++ = ',';
    p = put_ll(p, o->priority);
    *p++ = ',';
    p = put_ll(p, o->max_attempts ? o->max_attempts : 3);
    *p++ = ',';
    size_t slen = strlen(spec);
    memcpy(p, spec, slen);
    p += slen;
    if (o->timeout_ms || o->dedup_ms || o->debounce) {
        *p++ = ';';
        if (o->timeout_ms) p = put_ll(p, o->timeout_ms);
    }
    if (o->dedup_ms || o->debounce) {
        *p++ = ';';
        if (o->dedup_ms) p = put_ll(p, o->dedup_ms);
    }
    if (o->debounce) {
        *p++ = ';';
        *p++ = '1';
    }
    *p = '\0';
    return RJQ_OK;
}

int rjq__parse_ll(const char *s, size_t len, long long lo, long long hi, long long *out) {
    size_t i = len > 0 && s[0] == '-';
    if (i == len) return -1;
    unsigned long long v = 0, limit = i ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (limit - (unsigned long long)(s[i] - '0')) / 10)
            return -1;
        v = v * 10 + (unsigned long long)(s[i] - '0');
    }
    long long x = s[0] != '-'                            ? (long long)v
                  : v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN
                                                           : -(long long)v;
    if (x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

int rjq__valid_index_field(const char *s, size_t len) {
    if (s == NULL || len == 0 || len > RJQ_INDEX_FIELD_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return 0;
    }
    return 1;
}

int rjq__valid_index_fields(const char *s, size_t len) {
    size_t n = 0, at = 0;
    while (at < len) {
        const char *sp = memchr(s + at, ' ', len - at);
        size_t end = sp ? (size_t)(sp - s) : len;
        if (++n > RJQ_INDEX_FIELDS_MAX || !rjq__valid_index_field(s + at, end - at)) return 0;
        if (sp && end + 1 == len) return 0; /* a trailing space */
        at = end + 1;
    }
    return 1;
}
