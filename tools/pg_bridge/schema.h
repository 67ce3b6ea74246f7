/*
 * The bridge's table and the statements it runs on it (README.md,
 * "PostgreSQL outbox bridge", documents the table).
 *
 * Statuses: queued -> migrated -> processing <-> retry_scheduled ->
 * completed | failed | cancelled. A row is "open" while queued, migrated,
 * processing or retry_scheduled. Every write of an outcome names the
 * statuses it may follow, so a late or repeated write never moves a row
 * back from a final status.
 */
#ifndef RJQ_PG_SCHEMA_H
#define RJQ_PG_SCHEMA_H

/* Every statement names the table "rjq_jobs" (its indexes, functions and
 * triggers "rjq_jobs_...", its channel 'rjq_jobs'): sqlname.h renders them
 * for the --table in use. */
#define PGB_JOB_PREFIX "pg-" /* job id = "pg-<row id>" (rjq ids are not all digits), or
                             "pg-<row id>-<generation>" from generation 1 on; a table
                             other than rjq_jobs: "pg-<table>-<row id>[-<generation>]" */

/* --init: idempotent (IF NOT EXISTS / OR REPLACE). Two partial indexes
 * hold the open rows only, so the hot queries stay small however many
 * finished rows the table keeps, and each query has exactly one index
 * that fits it (a planner without statistics, right after a bulk insert,
 * cannot pick a worse one): rjq_jobs_queued serves the claim in claim
 * order, and the lag and the queued depth as index-only scans;
 * rjq_jobs_open serves the follow scan in id order and the other depths,
 * index-only. */
#define PGB_SQL_INIT                                                                          \
    "CREATE TABLE IF NOT EXISTS rjq_jobs (\n"                                                 \
    "  id           bigserial PRIMARY KEY,\n"                                                 \
    "  queue        text NOT NULL,\n"                                                         \
    "  payload      bytea NOT NULL DEFAULT '',\n"                                             \
    "  priority     integer NOT NULL DEFAULT 0,\n"                                            \
    "  run_at       timestamptz NOT NULL DEFAULT now(),\n"                                    \
    "  max_attempts integer NOT NULL DEFAULT 3,\n"                                            \
    "  status       text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'migrated',\n" \
    "                 'processing', 'retry_scheduled', 'completed', 'failed', 'cancelled')),\n" \
    "  attempts     integer NOT NULL DEFAULT 0,\n"                                            \
    "  result       bytea,\n"                                                                 \
    "  error        text,\n"                                                                  \
    "  created_at   timestamptz NOT NULL DEFAULT now(),\n"                                    \
    "  updated_at   timestamptz NOT NULL DEFAULT now()\n"                                     \
    ");\n"                                                                                    \
    "ALTER TABLE rjq_jobs ADD COLUMN IF NOT EXISTS generation integer NOT NULL DEFAULT 0,\n"  \
    "  ADD COLUMN IF NOT EXISTS started_at timestamptz,\n"                                    \
    "  ADD COLUMN IF NOT EXISTS completed_at timestamptz,\n"                                  \
    "  ADD COLUMN IF NOT EXISTS failed_at timestamptz,\n"                                     \
    "  ADD COLUMN IF NOT EXISTS worker_id text,\n"                                            \
    "  ADD COLUMN IF NOT EXISTS last_error text,\n"                                           \
    "  ADD COLUMN IF NOT EXISTS backoff text,\n"                                              \
    "  ADD COLUMN IF NOT EXISTS backoff_ms bigint,\n"                                         \
    "  ADD COLUMN IF NOT EXISTS backoff_max_ms bigint,\n"                                     \
    "  ADD COLUMN IF NOT EXISTS timeout_ms bigint;\n"                                         \
    "CREATE INDEX IF NOT EXISTS rjq_jobs_queued ON rjq_jobs (priority DESC, id)\n"            \
    "  INCLUDE (queue, created_at) WHERE status = 'queued';\n"                                \
    "CREATE INDEX IF NOT EXISTS rjq_jobs_open ON rjq_jobs (id) INCLUDE (queue, status)\n"     \
    "  WHERE status IN ('migrated', 'processing', 'retry_scheduled');\n"                      \
    "CREATE OR REPLACE FUNCTION rjq_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$\n"   \
    "BEGIN PERFORM pg_notify('rjq_jobs', ''); RETURN NULL; END $$;\n"                  \
    "CREATE OR REPLACE TRIGGER rjq_jobs_inserted AFTER INSERT ON rjq_jobs\n"                  \
    "  FOR EACH STATEMENT EXECUTE FUNCTION rjq_jobs_notify();\n"                              \
    "CREATE OR REPLACE FUNCTION rjq_jobs_replay() RETURNS trigger LANGUAGE plpgsql AS $$\n"   \
    "BEGIN NEW.generation := OLD.generation + 1; NEW.started_at := NULL;\n"                   \
    "  NEW.completed_at := NULL; NEW.failed_at := NULL; NEW.worker_id := NULL;\n"             \
    "  NEW.last_error := NULL; RETURN NEW; END $$;\n"                                         \
    "CREATE OR REPLACE TRIGGER rjq_jobs_replayed BEFORE UPDATE OF status ON rjq_jobs\n"       \
    "  FOR EACH ROW WHEN (NEW.status = 'queued'\n"                                            \
    "    AND OLD.status IN ('completed', 'failed', 'cancelled'))\n"                          \
    "  EXECUTE FUNCTION rjq_jobs_replay();\n"                                                 \
    "CREATE OR REPLACE TRIGGER rjq_jobs_requeued AFTER UPDATE OF status ON rjq_jobs\n"        \
    "  FOR EACH ROW WHEN (NEW.status = 'queued' AND OLD.status <> 'queued')\n"                \
    "  EXECUTE FUNCTION rjq_jobs_notify();\n"

/* Claim: in a transaction held open until the rows are marked.
 * $1 batch size, $2 the queues served (text[]; NULL: all), $3 queues to
 * leave out for now (Redis refused their last enqueue). Binary results:
 * id int8, queue text, payload bytea, priority int4, max_attempts int4,
 * delay_ms int8, generation int4, backoff text (NULL: the default),
 * backoff_ms int8, backoff_max_ms int8, timeout_ms int8 (0: NULL).
 * The delay counts from the statement's time, not the transaction's start
 * (now()): claims overlap, and a row inserted after a claim began would be
 * delayed by the gap. */
#define PGB_SQL_BEGIN "BEGIN"
/* The claim walks rjq_jobs_queued in its order and stops at the batch:
 * without statistics (a bulk insert not yet analyzed) the planner would
 * rather collect every queued row and sort them (40x slower with 50 000
 * rows queued, and growing with the backlog). */
#define PGB_SQL_CLAIM_PLAN "SET LOCAL enable_bitmapscan = off"
#define PGB_SQL_CLAIM                                                                      \
    "SELECT id, queue, payload, priority, max_attempts,\n"                                 \
    "  CASE WHEN run_at <= statement_timestamp() THEN 0\n"                                 \
    "    WHEN NOT isfinite(run_at) THEN 9223372036854775807\n"                             \
    "    ELSE LEAST(ceil(extract(epoch FROM run_at - statement_timestamp()) * 1000),\n"    \
    "      9e18)::bigint END,\n"                                                           \
    "  generation, backoff, COALESCE(backoff_ms, 0), COALESCE(backoff_max_ms, 0),\n"        \
    "  COALESCE(timeout_ms, 0)\n"                                                           \
    "FROM rjq_jobs WHERE status = 'queued' AND ($2::text[] IS NULL OR queue = ANY($2))\n"  \
    "  AND ($3::text[] IS NULL OR queue <> ALL($3))\n"                                     \
    "ORDER BY priority DESC, id LIMIT $1 FOR UPDATE SKIP LOCKED"
/* $1 bigint[] of the rows acknowledged by Redis */
#define PGB_SQL_MIGRATED \
    "UPDATE rjq_jobs SET status = 'migrated', updated_at = now() WHERE id = ANY($1::bigint[])"
/* $1 id, $2 error: a row that cannot become a job */
#define PGB_SQL_BAD \
    "UPDATE rjq_jobs SET status = 'failed', error = $2, last_error = $2, failed_at = now(),\n" \
    "  updated_at = now() WHERE id = $1"
#define PGB_SQL_COMMIT "COMMIT"
#define PGB_SQL_ROLLBACK "ROLLBACK"

/* Every write names the row's generation ($3 in PGB_SQL_ACTIVE, $2 in
 * PGB_SQL_FAILED_ROW, $7 in PGB_SQL_SET): an event of an older
 * generation's job changes nothing.
 *
 * A job started: $1 id, $2 the statuses it may follow (text[]). A start
 * counts as an attempt when the row was not processing already (another
 * bridge may write the same start), and sets started_at then. */
#define PGB_SQL_ACTIVE                                                                  \
    "UPDATE rjq_jobs SET status = 'processing', updated_at = now(),\n"                  \
    "  started_at = CASE WHEN status = 'processing' THEN started_at ELSE now() END,\n"  \
    "  attempts = attempts + CASE WHEN status = 'processing' THEN 0 ELSE 1 END\n"       \
    "WHERE id = $1 AND status = ANY($2::text[]) AND generation = $3"
/* A job this bridge does not follow started: is its row failed (its dead
 * job was replayed)? $1 id, $2 the generation; the row's queue and
 * priority (text) when so. */
#define PGB_SQL_FAILED_ROW \
    "SELECT queue, priority FROM rjq_jobs WHERE id = $1 AND status = 'failed' AND generation = $2"
/* Any other outcome: $1 id, $2 status, $3 result (bytea, binary; NULL:
 * unchanged), $4 error (NULL: unchanged), $5 attempts (-1: unchanged),
 * $6 the statuses it may follow (text[]), $7 the generation, $8 the job's
 * last failure text (NULL: unchanged), $9 and $10 the start of the job's
 * last attempt and its end, from rjq's record (server ms since the epoch;
 * NULL: the record has none). started_at becomes $9 (NULL: unchanged); a
 * completed row gets completed_at, a failed one failed_at, $10 or else
 * now() (the first time only: a repeated write keeps it). */
#define PGB_SQL_SET                                                                    \
    "UPDATE rjq_jobs SET status = $2, result = COALESCE($3, result),\n"                 \
    "  error = COALESCE($4, error),\n"                                                  \
    "  attempts = CASE WHEN $5::int >= 0 THEN $5::int ELSE attempts END,\n"             \
    "  started_at = COALESCE(timestamptz 'epoch' + $9::bigint * interval '1 ms',\n"     \
    "    started_at),\n"                                                                \
    "  completed_at = CASE WHEN $2 = 'completed' AND status <> 'completed'\n"           \
    "    THEN COALESCE(timestamptz 'epoch' + $10::bigint * interval '1 ms', now())\n"   \
    "    ELSE completed_at END,\n"                                                      \
    "  failed_at = CASE WHEN $2 = 'failed' AND status <> 'failed'\n"                    \
    "    THEN COALESCE(timestamptz 'epoch' + $10::bigint * interval '1 ms', now())\n"   \
    "    ELSE failed_at END,\n"                                                         \
    "  last_error = COALESCE($8, last_error), updated_at = now()\n"                     \
    "WHERE id = $1 AND status = ANY($6::text[]) AND generation = $7"

/* The process that ran a completed job's last attempt: $1 id, $2
 * "host:pid", $3 the generation. */
#define PGB_SQL_WORKER "UPDATE rjq_jobs SET worker_id = $2 WHERE id = $1 AND generation = $3"

/* Open rows the bridge follows, after id $1, of the queues served ($2 as
 * in the claim). Binary: id int8, queue text, generation int4, priority
 * int4 (--route-priority routes by it). */
#define PGB_SQL_FOLLOW_SCAN                                                                \
    "SELECT id, queue, generation, priority FROM rjq_jobs\n"                               \
    "WHERE status IN ('migrated', 'processing', 'retry_scheduled') AND id > $1\n"          \
    "  AND ($2::text[] IS NULL OR queue = ANY($2))\n"                                      \
    "ORDER BY id LIMIT 1000"
#define PGB_FOLLOW_PAGE 1000

/* The report (text results): depth per queue and open status, each part
 * an index-only scan of its partial index; the lag: the age of the oldest
 * queued row. */
#define PGB_SQL_DEPTH                                                                   \
    "SELECT queue, 'queued', count(*) FROM rjq_jobs WHERE status = 'queued' GROUP BY 1\n" \
    "UNION ALL SELECT queue, status, count(*) FROM rjq_jobs\n"                            \
    "WHERE status IN ('migrated', 'processing', 'retry_scheduled') GROUP BY 1, 2\n"       \
    "ORDER BY 1, 2"
#define PGB_SQL_LAG \
    "SELECT COALESCE(extract(epoch FROM now() - min(created_at)), 0) FROM rjq_jobs WHERE status = 'queued'"

#endif
