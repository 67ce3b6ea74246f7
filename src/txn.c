/*
 * Transactions: one request that runs several calls of one script, and
 * plain commands among them, in MULTI/EXEC (rjq__script_parts_after).
 * Its command is MULTI, the commands and calls, EXEC; each call's
 * arguments are kept to rebuild it when the session's mode changes
 * (FCALL or EVALSHA). The answers to MULTI and the calls (QUEUED, or an
 * error that makes EXEC fail) are read here; the EXEC's reply says the
 * request's outcome (rjq__txn_outcome), which request.c's on_reply
 * handles as a single command's.
 */
#include <stdlib.h>
#include <string.h>

#include "request_private.h"

/* The answer to MULTI or to one call of a transaction (QUEUED, or an error
 * that makes its EXEC fail): the first error is kept for the EXEC's
 * callback, which reports it (see on_reply). */
static void on_part(redisAsyncContext *ac, void *reply, void *priv) {
    rjq__req *r = priv;
    redisReply *rep = reply;
    (void)ac;
    /* (no reply: the connection went; r may be gone too, see rjq__txn_send) */
    if (rep == NULL || r->c == NULL || rep->type != REDIS_REPLY_ERROR || r->part_err) return;
    r->part_err = malloc(rep->len + 1);
    if (r->part_err) memcpy(r->part_err, rep->str, rep->len + 1);
}

/* Write transaction r's command to the context: its MULTI, calls and
 * EXEC, each with its callback (hiredis answers them in order, the EXEC's
 * last, to `done`). REDIS_ERR: r was not sent (it waits for the
 * next connection). A transaction cut short (hiredis out of memory after
 * its MULTI went in) leaves the connection inside MULTI: it is dropped,
 * so nothing more is written on it, and the callbacks of what went in get
 * no reply (on_part then leaves r alone: it may be freed by then). */
int rjq__txn_send(redisAsyncContext *ac, rjq__req *r, redisCallbackFn *done) {
    RJQ_ASSERT(r->nparts > 0 && r->part_end != NULL);
    free(r->part_err);
    r->part_err = NULL;
    size_t at = 0;
    int last = r->npre + r->nparts; /* MULTI, the calls and commands, EXEC */
    for (int i = 0; i <= last + 1; i++) {
        size_t end = i <= last ? r->part_end[i] : r->len;
        if (redisAsyncFormattedCommand(ac, i <= last ? on_part : done, r, r->cmd + at,
                                       end - at) != REDIS_OK) {
            if (i > 0) rjq__conn_drop(&r->c->cmd, "out of memory");
            return REDIS_ERR;
        }
        at = end;
    }
    return REDIS_OK;
}

/* A transaction's command for the session's mode: MULTI, its calls (each
 * its head and arguments) with the plain commands after the first
 * pre_after of them (pre, each ending at pre_end[i] in it; NULL: those of
 * r's cmd), EXEC. 0, or -1 out of memory (r unchanged). */
int rjq__txn_build(int fcall, rjq__req *r, const char *pre, const size_t *pre_end) {
    static const char multi[] = "*1\r\n$5\r\nMULTI\r\n", exec[] = "*1\r\n$4\r\nEXEC\r\n";
    char head[160];
    size_t len = sizeof multi - 1 + sizeof exec - 1 + r->pre_len;
    for (int i = 0; i < r->nparts; i++)
        len += (size_t)rjq__script_head(r->script, r->parts[i].nargs, fcall, head, sizeof head) +
               r->parts[i].len;
    /* NUL-ended, as hiredis' own formatted commands are: hiredis reads the
     * byte after a command's name (its EXEC here) to see whether more
     * arguments follow */
    char *cmd = malloc(len + 1);
    if (cmd == NULL) return -1;
    cmd[len] = '\0';
    /* (rebuilt: where the plain commands start in the old cmd; the ends
     * after it are read before they are overwritten) */
    size_t old_at = pre || r->npre == 0 ? 0 : r->part_end[r->pre_after];
    size_t at = sizeof multi - 1;
    int k = 1; /* the command after MULTI */
    memcpy(cmd, multi, at);
    r->part_end[0] = at;
    for (int i = 0; i <= r->nparts; i++) {
        if (i == r->pre_after && r->npre > 0) {
            memcpy(cmd + at, pre ? pre : r->cmd + old_at, r->pre_len);
            for (int j = 0; j < r->npre; j++, k++)
                r->part_end[k] = at + (pre ? pre_end[j] : r->part_end[k] - old_at);
            at += r->pre_len;
        }
        if (i == r->nparts) break;
        int hlen = rjq__script_head(r->script, r->parts[i].nargs, fcall, head, sizeof head);
        memcpy(cmd + at, head, (size_t)hlen);
        at += (size_t)hlen;
        memcpy(cmd + at, r->parts[i].p, r->parts[i].len);
        at += r->parts[i].len;
        r->part_end[k++] = at;
    }
    RJQ_ASSERT(k == 1 + r->npre + r->nparts);
    RJQ_ASSERT(at + sizeof exec - 1 == len); /* the length counted is the length written */
    memcpy(cmd + at, exec, sizeof exec - 1);
    rjq__req_free_cmd(r); /* (after the copy: the old parts may be in it) */
    r->cmd = cmd;
    r->own_cmd = 1;
    r->len = len;
    r->fcall = fcall;
    return 0;
}

/* (see request_private.h) */
int rjq__txn_init(rjq_client *c, rjq__req *r, const rjq__buf *pre, const size_t *pre_end,
                  int npre, int after, int nparts, rjq__buf *parts, const int *nargs) {
    RJQ_ASSERT(r->state == REQ_NEW && r->script >= 0 && r->nparts == 0);
    r->parts = calloc((size_t)nparts, sizeof *r->parts);
    r->part_end = calloc((size_t)(1 + npre + nparts), sizeof *r->part_end);
    int ok = r->parts && r->part_end;
    if (ok && npre > 0) { /* copied into cmd */
        r->npre = npre;
        r->pre_after = after;
        r->pre_len = pre->len;
    }
    for (int i = 0; ok && i < nparts; i++, r->nparts++) { /* taken, not copied */
        r->parts[i] = (part_args){parts[i].p, parts[i].len, nargs[i]};
        memset(&parts[i], 0, sizeof parts[i]);
    }
    if (!ok || rjq__txn_build(c->cmd.fcall, r, npre ? pre->p : NULL, pre_end) != 0) return -1;
    return 0;
}

/* A transaction's outcome from its EXEC reply: an error answered to MULTI
 * or a call (the EXEC then failed: nothing ran), or the error of its calls
 * when every one failed (nothing they would write was written: the script
 * or library was missing, say), is the request's error, handled as a
 * single command's is (retried, re-sent after loading the script...);
 * else the EXEC's array, one reply per command before the calls, then one
 * per call. The commands before the calls are the caller's to make safe to
 * run twice (see rjq__script_parts_after). err: room for the error. */
redisReply *rjq__txn_outcome(rjq__req *r, redisReply *rep, redisReply *err) {
    RJQ_ASSERT(r->nparts > 0 && rep != NULL);
    if (r->part_err) {
        memset(err, 0, sizeof *err);
        err->type = REDIS_REPLY_ERROR;
        err->str = r->part_err;
        err->len = strlen(r->part_err);
        return err;
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != (size_t)(r->npre + r->nparts))
        return rep;
    size_t from = (size_t)r->pre_after, to = from + (size_t)r->npre; /* the plain commands' */
    redisReply *first = NULL;
    for (size_t i = 0; i < rep->elements; i++) {
        if (i >= from && i < to) continue;
        if (rep->element[i]->type != REDIS_REPLY_ERROR) return rep;
        if (first == NULL) first = rep->element[i];
    }
    return first;
}

