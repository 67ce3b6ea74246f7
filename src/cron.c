/* Cron expressions (cron.h). */
#include "cron.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define CRON_T_MAX (1LL << 62)

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

/* A number or (names != NULL) a name of the field at *p; advances *p. */
static int field_value(const char **p, const char *const *names, int nnames, int name_base,
                       int *out) {
    const char *s = *p;
    if (isdigit((unsigned char)*s)) {
        long v = 0;
        while (isdigit((unsigned char)*s)) {
            v = v * 10 + (*s++ - '0');
            if (v > 1000) return -1;
        }
        *p = s;
        *out = (int)v;
        return 0;
    }
    for (int i = 0; names && i < nnames; i++)
        if (strncasecmp(s, names[i], 3) == 0 && !isalpha((unsigned char)s[3])) {
            *p = s + 3;
            *out = i + name_base;
            return 0;
        }
    return -1;
}

/* One field (up to its end: a space or NUL) into bits lo..hi. */
static int parse_field(const char **p, int lo, int hi, const char *const *names, int nnames,
                       int name_base, uint64_t *bits, int *star) {
    const char *s = *p;
    *bits = 0;
    *star = s[0] == '*'; /* as Vixie cron: "*" or a step of it leaves a day field unrestricted */
    for (;;) {
        int a, b, step = 1, single = 0;
        if (*s == '*') {
            a = lo, b = hi;
            s++;
        } else {
            if (field_value(&s, names, nnames, name_base, &a)) return -1;
            b = a;
            single = 1;
            if (*s == '-') {
                s++;
                single = 0;
                if (field_value(&s, names, nnames, name_base, &b)) return -1;
            }
        }
        if (*s == '/') {
            s++;
            if (!isdigit((unsigned char)*s)) return -1;
            step = 0;
            while (isdigit((unsigned char)*s)) {
                step = step * 10 + (*s++ - '0');
                if (step > 1000) return -1;
            }
            if (step == 0) return -1;
            if (single) b = hi; /* "a/n": from a to the end */
        }
        if (a < lo || b > hi || a > b) return -1;
        for (int v = a; v <= b; v += step) *bits |= (uint64_t)1 << v;
        if (*s == ',') {
            s++;
            continue;
        }
        if (*s != '\0' && *s != ' ') return -1;
        break;
    }
    *p = s;
    return 0;
}

static const struct {
    const char *name, *expr;
} macros[] = {
    {"@yearly", "0 0 1 1 *"},  {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"},  {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
};

int rjq__cron_parse(const char *expr, rjq__cron *out, const char **why) {
    const char *fields[6];
    int n = 0;
    memset(out, 0, sizeof *out);
    *why = "expected 5 fields (minute hour day month weekday) or 6 (seconds first)";
    if (expr == NULL) return -1;
    while (*expr == ' ') expr++;
    if (*expr == '@') {
        for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++)
            if (strcmp(expr, macros[i].name) == 0) return rjq__cron_parse(macros[i].expr, out, why);
        *why = "unknown macro (@yearly @monthly @weekly @daily @hourly)";
        return -1;
    }
    for (const char *s = expr; *s;) {
        if (*s == ' ') {
            s++;
            continue;
        }
        if (n == 6) return -1;
        fields[n++] = s;
        while (*s && *s != ' ') s++;
    }
    if (n != 5 && n != 6) return -1;
    int i = 0, star;
    uint64_t bits;
    static const char *const what[] = {"seconds", "minute", "hour", "day of month", "month",
                                       "weekday"};
    int first = n == 6 ? 0 : 1;
    out->sec = 1; /* five fields: at second 0 */
    for (int f = first; f < 6; f++, i++) {
        const char *p = fields[i];
        int rc = 0;
        switch (f) {
        case 0: rc = parse_field(&p, 0, 59, NULL, 0, 0, &out->sec, &star); break;
        case 1: rc = parse_field(&p, 0, 59, NULL, 0, 0, &out->min, &star); break;
        case 2:
            rc = parse_field(&p, 0, 23, NULL, 0, 0, &bits, &star);
            out->hour = (uint32_t)bits;
            break;
        case 3:
            rc = parse_field(&p, 1, 31, NULL, 0, 0, &bits, &out->dom_star);
            out->dom = (uint32_t)bits;
            break;
        case 4:
            rc = parse_field(&p, 1, 12, month_names, 12, 1, &bits, &star);
            out->month = (uint16_t)bits;
            break;
        case 5:
            rc = parse_field(&p, 0, 7, day_names, 7, 0, &bits, &out->dow_star);
            if (bits & 0x80) bits = (bits | 1) & 0x7f; /* 7 is Sunday */
            out->dow = (uint8_t)bits;
            break;
        }
        if (rc) {
            *why = what[f];
            return -1;
        }
    }
    *why = NULL;
    return 0;
}

static int day_matches(const rjq__cron *c, const struct tm *tm) {
    int dom = (c->dom >> tm->tm_mday) & 1, dow = (c->dow >> tm->tm_wday) & 1;
    if (c->dom_star || c->dow_star) return dom && dow; /* one of them is "every day" */
    return dom || dow;
}

long long rjq__cron_next(const rjq__cron *c, int offset_min, long long after) {
    /* (beyond these no sum below is sure not to overflow) */
    if (after < -CRON_T_MAX || after > CRON_T_MAX || offset_min < -1440 || offset_min > 1440)
        return -1;
    const long long off = (long long)offset_min * 60;
    /* whole seconds, local (shifted) time */
    long long t = (after >= 0 ? after / 1000 : (after - 999) / 1000) + 1 + off;
    const long long limit = t + 5LL * 366 * 86400;
    while (t < limit) {
        time_t tt = (time_t)t;
        struct tm tm;
        if (gmtime_r(&tt, &tm) == NULL) return -1;
        if (!((c->month >> (tm.tm_mon + 1)) & 1)) { /* to the next month's first day */
            tm.tm_mon++, tm.tm_mday = 1, tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
            t = (long long)timegm(&tm);
            continue;
        }
        if (!day_matches(c, &tm)) {
            t += 86400 - (tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec);
            continue;
        }
        if (!((c->hour >> tm.tm_hour) & 1)) {
            t += 3600 - (tm.tm_min * 60 + tm.tm_sec);
            continue;
        }
        if (!((c->min >> tm.tm_min) & 1)) {
            t += 60 - tm.tm_sec;
            continue;
        }
        if (!((c->sec >> tm.tm_sec) & 1)) {
            t++;
            continue;
        }
        return (t - off) * 1000;
    }
    return -1;
}
