/*
 * The bridge's table name (--table): the statements of schema.h name the
 * table "rjq_jobs", and its indexes, functions, triggers and notification
 * channel "rjq_jobs_..." / 'rjq_jobs'; pgb_sql renders them for another
 * name, so two tables (and their bridges) coexist in one database.
 */
#ifndef RJQ_PG_SQLNAME_H
#define RJQ_PG_SQLNAME_H

#define PGB_TABLE_DEFAULT "rjq_jobs"
#define PGB_TABLE_MAX 40 /* the longest derived name ("<table>_requeued") fits 63 bytes */

/* 1 when name is 1..PGB_TABLE_MAX bytes of a-z, 0-9 and _, not starting
 * with a digit (so its derived names are valid and unambiguous). */
int pgb_table_ok(const char *name);

/* tmpl with every identifier that starts with "rjq_jobs" renamed to start
 * with table instead, written as a quoted identifier ("<table>..."); inside
 * a '...' literal (the channel of pg_notify) the bare name. malloc'd; NULL
 * when out of memory. */
char *pgb_sql(const char *tmpl, const char *table);

#endif
