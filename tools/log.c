/* The long-running tools' log lines: see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "utf8.h"

static log_format format = LOG_TEXT;
static const char *prefix = "rjq";
static int text_time;

int log_format_parse(const char *name, log_format *out) {
    if (name && strcmp(name, "text") == 0) *out = LOG_TEXT;
    else if (name && strcmp(name, "json") == 0) *out = LOG_JSON;
    else return -1;
    return 0;
}

void log_init(log_format f, const char *p, int time_in_text) {
    format = f;
    prefix = p;
    text_time = time_in_text;
}

log_format log_get_format(void) {
    return format;
}

/* s as a JSON string: valid UTF-8 passed through, control bytes and the
 * bytes of no valid character escaped as \u00XX (the line stays JSON
 * whatever a client sent). */
static void json_string(FILE *out, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    fputc('"', out);
    while (left) {
        size_t k = *p >= 0x80 ? utf8_char_len(p, left) : 1;
        if (k > 1) fwrite(p, 1, k, out);
        else if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", out);
        else if (*p < 0x20 || *p >= 0x7f) fprintf(out, "\\u%04x", *p);
        else fputc(*p, out);
        k = k ? k : 1;
        p += k;
        left -= k;
    }
    fputc('"', out);
}

/* s in a text line: as is when it has no space, quote, '=' or control
 * byte, else quoted as JSON. */
static void text_value(FILE *out, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == 0x7f) {
            json_string(out, s);
            return;
        }
    fputs(*s ? s : "\"\"", out);
}

void log_line(const char *level, const log_field *f, size_t n, const char *fmt, ...) {
    char *msg = NULL, *text = NULL;
    size_t len = 0;
    va_list ap;
    va_start(ap, fmt);
    int ml = vasprintf(&msg, fmt, ap);
    va_end(ap);
    FILE *out = open_memstream(&text, &len);
    if (ml < 0 || out == NULL) { /* out of memory: the message at least */
        if (out) fclose(out);
        free(text);
        fprintf(stderr, "%s: %s\n", prefix, ml < 0 ? fmt : msg);
        if (ml >= 0) free(msg);
        return;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    char when[32];
    gmtime_r(&tv.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    if (format == LOG_JSON) {
        fprintf(out, "{\"time\":\"%s.%03ldZ\",\"level\":", when, (long)(tv.tv_usec / 1000));
        json_string(out, level);
        fputs(",\"message\":", out);
        json_string(out, msg);
        for (size_t i = 0; i < n; i++) {
            fputc(',', out);
            json_string(out, f[i].key);
            fputc(':', out);
            if (f[i].kind == LOGF_INT) fprintf(out, "%lld", f[i].i);
            else if (f[i].kind == LOGF_NUM) fprintf(out, "%.6g", f[i].d);
            else if (f[i].s) json_string(out, f[i].s);
            else fputs("null", out);
        }
        fputs("}\n", out);
    } else {
        if (text_time) fprintf(out, "%s.%03ldZ ", when, (long)(tv.tv_usec / 1000));
        fprintf(out, "%s: %s", prefix, msg);
        if (strcmp(level, "info") != 0 && n) fprintf(out, " level=%s", level);
        for (size_t i = 0; i < n; i++) {
            fprintf(out, " %s=", f[i].key);
            if (f[i].kind == LOGF_INT) fprintf(out, "%lld", f[i].i);
            else if (f[i].kind == LOGF_NUM) fprintf(out, "%.6g", f[i].d);
            else if (f[i].s) text_value(out, f[i].s);
            else fputc('-', out);
        }
        fputc('\n', out);
    }
    free(msg);
    if (fclose(out) == 0 && text) fwrite(text, 1, len, stderr);
    free(text);
}
