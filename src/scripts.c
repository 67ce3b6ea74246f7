/*
 * rjq's scripts on the command connection: the head that runs one (FCALL
 * of its function in rjq's library when the session has the library,
 * else EVALSHA of the script), and the session's set-up step that loads
 * the library (FUNCTION LOAD), or, where the server has no functions or
 * they are not permitted, every script for EVALSHA (SCRIPT LOAD).
 * Re-sending a request whose script or library went missing (NOSCRIPT,
 * "Function not found") is request.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request_private.h"
#include "validate.h"

/* The command head that runs `script`: FCALL of its function in rjq's
 * library when the session has it, else EVALSHA. */
int rjq__script_head(int script, int nargs, int fcall, char *out, size_t cap) {
    RJQ_ASSERT(script >= 0 && script < RJQ__SCRIPT_COUNT && nargs >= 0);
    const rjq__script_def *s = &rjq__scripts[script];
    /* "*<nargs+2>\r\n$5\r\nFCALL\r\n$<len>\r\n<function>\r\n", or
     * "...$7\r\nEVALSHA\r\n$40\r\n<sha>\r\n": by hand, no snprintf (a
     * head per script call, on every hot path) */
    const char *name = fcall ? s->function : s->sha;
    size_t nlen = fcall ? strlen(name) : 40;
    char num[RJQ__DEC_MAX], nl[RJQ__DEC_MAX];
    size_t numlen = rjq__dec(num, (long long)nargs + 2), nllen = rjq__dec(nl, (long long)nlen);
    const char *verb = fcall ? "\r\n$5\r\nFCALL\r\n$" : "\r\n$7\r\nEVALSHA\r\n$";
    size_t vlen = strlen(verb), n = 1 + numlen + vlen + nllen + 2 + nlen + 2;
    RJQ_ASSERT(n < cap); /* whole: the callers copy n bytes of out */
    if (n >= cap) return 0;
    char *p = out;
    *p++ = '*';
    memcpy(p, num, numlen), p += numlen;
    memcpy(p, verb, vlen), p += vlen;
    memcpy(p, nl, nllen), p += nllen;
    *p++ = '\r', *p++ = '\n';
    memcpy(p, name, nlen), p += nlen;
    *p++ = '\r', *p++ = '\n';
    *p = '\0';
    return (int)n;
}

/* The numkeys of a script call: its first argument (args: RESP bulk
 * strings), or -1 when that is no number. */
static long numkeys_of(const char *args, size_t len) {
    const char *end = args + len, *p = len ? memchr(args, '\n', len) : NULL;
    if (p == NULL || args[0] != '$') return -1;
    long n = 0;
    int digits = 0;
    for (p++; p < end && *p >= '0' && *p <= '9' && digits < 9; p++, digits++)
        n = n * 10 + (*p - '0');
    return digits && p < end && *p == '\r' ? n : -1;
}

/* Give script request r (its arguments: the len bytes at args) the head
 * for the session's mode, in a new buffer. 0, or -1 out of memory (r
 * unchanged). */
int rjq__script_set_head(int fcall, rjq__req *r, const char *args, size_t len) {
    /* its KEYS are the ones src/keys.def declares for it (queue.h appends them) */
    RJQ_ASSERT(numkeys_of(args, len) == rjq__scripts[r->script].nkeys);
    char head[160];
    int hlen = rjq__script_head(r->script, r->nargs, fcall, head, sizeof head);
    char *cmd = malloc((size_t)hlen + len + 1); /* NUL-ended: see rjq__txn_build */
    if (cmd == NULL) return -1;
    memcpy(cmd, head, (size_t)hlen);
    if (len) memcpy(cmd + hlen, args, len);
    cmd[(size_t)hlen + len] = '\0';
    rjq__req_free_cmd(r); /* (after the copy: args may be in it) */
    r->cmd = cmd;
    r->own_cmd = 1;
    r->len = (size_t)hlen + len;
    r->head_len = (size_t)hlen;
    r->fcall = fcall;
    return 0;
}

int rjq__script_head_in_block(int fcall, rjq__req *r, size_t args_len) {
    char *args = r->block + r->args_at;
    RJQ_ASSERT(numkeys_of(args, args_len) == rjq__scripts[r->script].nkeys);
    char head[160];
    size_t hlen = (size_t)rjq__script_head(r->script, r->nargs, fcall, head, sizeof head);
    if (hlen > r->args_at) return rjq__script_set_head(fcall, r, args, args_len);
    memcpy(args - hlen, head, hlen);
    r->cmd = args - hlen;
    r->len = hlen + args_len;
    r->head_len = hlen;
    r->fcall = fcall;
    return 0;
}

/* The answer to FUNCTION LOAD of rjq's library: it is there, or functions
 * are not to be had (before Redis 7, or not permitted): use EVALSHA. A
 * transient error (a server still loading its data, say) says nothing
 * about functions: keep FCALL, and "Function not found" loads the library
 * when it is missing. */
void rjq__library_loaded(rjq__conn *conn, const redisReply *reply) {
    conn->fcall = reply->type != REDIS_REPLY_ERROR || strstr(reply->str, "already exists") != NULL ||
               rjq__redis_error_transient(reply->str);
}

/* Without the function library, every script is loaded for EVALSHA. A
 * refusal is reported; a script call then fails with the server's words. */
static void on_script_loaded(rjq__conn *conn, redisReply *r, void *arg) {
    if (r->type == REDIS_REPLY_ERROR) rjq__conn_step_failed(conn, arg, r->str);
}

/* FUNCTION LOAD of rjq's library: loaded now or before, else (no functions
 * on this server, or not permitted) the scripts are loaded for EVALSHA.
 * Neither is an error. */
static void on_library_step(rjq__conn *conn, redisReply *r, void *arg) {
    (void)arg;
    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0) {
        rjq__conn_step_failed(conn, "FUNCTION LOAD", r->str);
        return;
    }
    rjq__library_loaded(conn, r);
    for (int i = 0; !conn->fcall && i < RJQ__SCRIPT_COUNT; i++) {
        const char *argv[3] = {"SCRIPT", "LOAD", rjq__scripts[i].body};
        size_t lens[3] = {6, 4, rjq__scripts[i].len};
        if (rjq__conn_step(conn, on_script_loaded, "SCRIPT LOAD", 3, argv, lens) != RJQ_OK) {
            rjq__conn_drop(conn, "out of memory");
            return;
        }
    }
}

/* The command connection's set-up: FUNCTION LOAD of rjq's library. */
int rjq__scripts_setup(rjq__conn *conn) {
    /* Until the answer says otherwise, scripts wait for EVALSHA. */
    const char *argv[3] = {"FUNCTION", "LOAD", rjq__library};
    size_t lens[3] = {8, 4, rjq__library_len};
    conn->fcall = 0;
    return rjq__conn_step(conn, on_library_step, NULL, 3, argv, lens);
}

