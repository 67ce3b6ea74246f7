/*
 * pgconn: one PostgreSQL connection driven by a libevent loop with libpq's
 * asynchronous API, in pipeline mode.
 *
 * Work is sent as segments: pgconn_query() adds statements (extended
 * protocol, parameters as given) to the open segment and pgconn_sync()
 * ends it. A segment without BEGIN is one implicit transaction: all of its
 * statements take effect or none. Its callback is called exactly once with
 * every statement's result (err NULL), or with the first error (err set:
 * the server's message, or the connection's when it was lost; results are
 * then those received so far and may be fewer).
 *
 * The connection is made again by itself after a loss (backoff 100 ms to
 * 5 s); segments in flight then end with an error. Nothing is queued while
 * the connection is down: pgconn_query() fails (-1) then, and the caller
 * keeps its intent until the connection is back (the state callback says
 * when). After each (re)connect the session sets client_encoding UTF8
 * and LISTENs on the channel given; every notification is handed to the
 * notify callback.
 */
#ifndef RJQ_PGCONN_H
#define RJQ_PGCONN_H

#include <event2/event.h>
#include <libpq-fe.h>

typedef struct pgconn pgconn;

/* up: 1 when the connection is ready for queries, 0 when it was lost
 * (err: why). */
typedef void pgconn_state_fn(pgconn *p, int up, const char *err, void *arg);
typedef void pgconn_notify_fn(pgconn *p, const char *channel, void *arg);
/* sqlstate: the server's SQLSTATE code of err ("40P01" ...), "" when the
 * error is not the server's (the connection was lost). */
typedef void pgconn_done_fn(void *arg, PGresult **res, int n, const char *err,
                            const char *sqlstate);

/* channel may be NULL (no LISTEN). Starts connecting at once. NULL when
 * out of memory. */
pgconn *pgconn_new(struct event_base *base, const char *conninfo, const char *channel,
                   pgconn_state_fn *on_state, pgconn_notify_fn *on_notify, void *arg);
/* Close the connection; segments in flight end with an error first. */
void pgconn_free(pgconn *p);

int pgconn_up(const pgconn *p);
/* Counts connections made: a value taken before and compared after tells
 * whether the connection was lost meanwhile. */
unsigned pgconn_generation(const pgconn *p);

/* Add a statement to the open segment: n parameters (values NULL for SQL
 * NULL; lens and fmts may be NULL: text), results in binary when
 * binary_result. 0, or -1 (connection down, or libpq refused: the segment
 * is then failed when synced). */
int pgconn_query(pgconn *p, const char *sql, int n, const char *const *values,
                 const int *lens, const int *fmts, int binary_result);
/* End the open segment; cb is called once (also when it holds no
 * statement). 0, or -1 when the connection is down (cb is not called). */
int pgconn_sync(pgconn *p, pgconn_done_fn *cb, void *arg);

#endif
