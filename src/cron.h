/*
 * Cron expressions (cron.c): a leaf, pure and unit-tested. Five fields
 * (minute hour day-of-month month day-of-week) or six with seconds first;
 * each field "*", a number, a range "a-b", a list "a,b", or a step: "/n"
 * after "*", a range or a start; months and weekdays also by name (JAN..DEC, SUN..SAT; 7 is
 * Sunday too). As in Vixie cron, when both day fields are restricted
 * (neither starts with "*") a day matches either; else it matches both.
 * Macros: @yearly (@annually), @monthly, @weekly,
 * @daily (@midnight), @hourly. Times are ms since the epoch; the
 * expression is read in UTC shifted by a fixed offset (minutes east).
 */
#ifndef RJQ_CRON_H
#define RJQ_CRON_H

#include <stddef.h>
#include <stdint.h>

typedef struct rjq__cron {
    uint64_t sec, min;        /* bit n: second/minute n matches */
    uint32_t hour, dom;       /* bit n: hour n, day of month n (1..31) */
    uint16_t month;           /* bit n: month n (1..12) */
    uint8_t dow;              /* bit n: weekday n (0 = Sunday) */
    int dom_star, dow_star;   /* the day field starts with "*" (as Vixie cron: unrestricted) */
} rjq__cron;

/* Parse expr. Returns 0, or -1 with why (a short text) set. */
int rjq__cron_parse(const char *expr, rjq__cron *out, const char **why);

/* The first time after `after` (ms) that matches, in whole seconds, with
 * the expression read at UTC+offset_min; -1 when none within 5 years
 * (e.g. February 30), or when after is beyond +-2^62 or offset_min beyond
 * +-1440. */
long long rjq__cron_next(const rjq__cron *c, int offset_min, long long after);

#endif
