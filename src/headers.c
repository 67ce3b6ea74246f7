/* Job headers: checks, their text, and reading it back (headers.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"

static int key_ok(const char *k, size_t len) {
    if (len == 0 || len > RJQ_HEADER_KEY_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = k[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return 0;
    }
    return 1;
}

static int value_ok(const char *v, size_t len) {
    if (len > RJQ_HEADER_VALUE_MAX) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e) return 0;
    return 1;
}

int rjq__headers_check(const rjq_header *h, size_t n, char *why, size_t whylen) {
    if (n == 0) return RJQ_OK;
    if (h == NULL || n > RJQ_HEADERS_MAX) {
        snprintf(why, whylen, "job headers: %zu given%s (at most %d)", n,
                 h == NULL ? " with headers NULL" : "", RJQ_HEADERS_MAX);
        return RJQ_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *k = h[i].key, *v = h[i].value;
        if (k == NULL || v == NULL) {
            snprintf(why, whylen, "job header %zu: key or value NULL", i);
            return RJQ_EINVAL;
        }
        size_t kl = strnlen(k, RJQ_HEADER_KEY_MAX + 1), vl = strnlen(v, RJQ_HEADER_VALUE_MAX + 1);
        if (!key_ok(k, kl)) {
            snprintf(why, whylen, "job header %zu: a key is 1..%d bytes of [A-Za-z0-9_.-]", i,
                     RJQ_HEADER_KEY_MAX);
            return RJQ_EINVAL;
        }
        if (!value_ok(v, vl)) {
            snprintf(why, whylen, "job header %.64s: a value is 0..%d printable ASCII bytes", k,
                     RJQ_HEADER_VALUE_MAX);
            return RJQ_EINVAL;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(h[j].key, k) == 0) {
                snprintf(why, whylen, "job header %.64s given twice", k);
                return RJQ_EINVAL;
            }
    }
    return RJQ_OK;
}

size_t rjq__headers_text_len(const rjq_header *h, size_t n) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += (i ? 1 : 0) + strlen(h[i].key) + 1 + strlen(h[i].value);
    return len;
}

void rjq__headers_text(const rjq_header *h, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) {
        if (i) *out++ = '\n';
        size_t kl = strlen(h[i].key), vl = strlen(h[i].value);
        memcpy(out, h[i].key, kl);
        out += kl;
        *out++ = '=';
        memcpy(out, h[i].value, vl);
        out += vl;
    }
}

int rjq__headers_options_check(const rjq_job_options *o, char *opts, char *why, size_t whylen) {
    if (o->nheaders == 0 && o->headers == NULL) return RJQ_OK;
    if (o->nheaders == 0) {
        snprintf(why, whylen, "job headers: headers set with nheaders 0");
        return RJQ_EINVAL;
    }
    if (rjq__headers_check(o->headers, o->nheaders, why, whylen) != RJQ_OK) return RJQ_EINVAL;
    if (opts[0] == '\0') strcpy(opts, "0,0,3,"); /* the defaults, spelt out */
    return RJQ_OK;
}

char *rjq__headers_options_text(const char *opts, const rjq_header *h, size_t n, size_t *len) {
    size_t ol = strlen(opts), hl = rjq__headers_text_len(h, n);
    char *t = malloc(ol + 1 + hl);
    if (t == NULL) return NULL;
    memcpy(t, opts, ol);
    t[ol] = '\n';
    rjq__headers_text(h, n, t + ol + 1);
    *len = ol + 1 + hl;
    return t;
}

rjq_header *rjq__headers_dup(const rjq_header *h, size_t n) {
    if (n == 0) return NULL;
    size_t bytes = n * sizeof *h;
    for (size_t i = 0; i < n; i++) bytes += strlen(h[i].key) + strlen(h[i].value) + 2;
    rjq_header *out = malloc(bytes);
    if (out == NULL) return NULL;
    char *p = (char *)(out + n);
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(h[i].key) + 1, vl = strlen(h[i].value) + 1;
        out[i].key = memcpy(p, h[i].key, kl);
        p += kl;
        out[i].value = memcpy(p, h[i].value, vl);
        p += vl;
    }
    return out;
}

rjq_header *rjq__headers_read(const char *text, size_t len, size_t *n, int *oom) {
    *n = 0;
    if (oom) *oom = 0;
    if (text == NULL || len == 0) return NULL;
    /* at most RJQ_HEADERS_MAX entries, and the text once (NULs for '=' and
     * '\n', one more at its end) */
    rjq_header *out = malloc(RJQ_HEADERS_MAX * sizeof *out + len + 1);
    if (out == NULL) {
        if (oom) *oom = 1;
        return NULL;
    }
    char *s = (char *)(out + RJQ_HEADERS_MAX);
    memcpy(s, text, len);
    s[len] = '\0';
    size_t k = 0;
    for (char *line = s, *end = s + len; line <= end && k < RJQ_HEADERS_MAX;) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(end - line);
        char *eq = memchr(line, '=', ll);
        if (eq && key_ok(line, (size_t)(eq - line)) &&
            value_ok(eq + 1, ll - (size_t)(eq - line) - 1)) {
            *eq = '\0';
            line[ll] = '\0';
            int dup = 0;
            for (size_t j = 0; j < k && !dup; j++) dup = strcmp(out[j].key, line) == 0;
            if (!dup) {
                out[k].key = line;
                out[k].value = eq + 1;
                k++;
            }
        }
        if (nl == NULL) break;
        line = nl + 1;
    }
    if (k == 0) {
        free(out);
        return NULL;
    }
    *n = k;
    return out;
}

/* Element i of rjq_job_info.headers, rjq_outcome.headers (rjq.h "Extensible structs": the library's own
 * stride, whatever sizeof the caller was built with). */
const rjq_header *rjq_header_get(const rjq_header *list, size_t i) {
    return list ? &list[i] : NULL;
}
