/* Push format 8 (src/push.c, push_to_idle in src/lua/lib.lua): a payload
 * of at least PUSH_SPLIT_MIN bytes follows its job's message as a message
 * of its own. Its bytes arrive whole and binary-safe, several in one push
 * too, a payload too big to push is read by the worker, and a push whose
 * payload message is lost (the subscription dropped between the two)
 * loses no job: the worker's recovering claim brings it back. */
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "server.h"

/* A payload of len bytes, every byte value in it (NUL, "\r\n", a leading
 * '!' as a notice's), seeded so two payloads differ. */
static char *make_bytes(size_t len, unsigned seed) {
    char *b = malloc(len ? len : 1);
    ASSERT(b != NULL);
    for (size_t i = 0; i < len; i++) b[i] = (char)(unsigned char)((i * 7 + seed) & 0xff);
    if (len > 0) b[0] = '!';
    return b;
}

#define MAX_SEEN 8

typedef struct seen {
    long jobs;
    struct {
        size_t len;
        unsigned seed;
        int whole;
    } got[MAX_SEEN];
} seen;

/* Which make_bytes(len, seed) the job's payload is, if any (seeds
 * 1..MAX_SEEN). */
static void check_handler(rjq_job *job, void *data) {
    seen *s = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    ASSERT(s->jobs < MAX_SEEN);
    long k = s->jobs++;
    s->got[k].len = len;
    s->got[k].whole = 0;
    for (unsigned seed = 1; seed <= MAX_SEEN && !s->got[k].whole; seed++) {
        char *want = make_bytes(len, seed);
        if (memcmp(p, want, len) == 0) s->got[k].whole = 1, s->got[k].seed = seed;
        free(want);
    }
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

static int saw(const seen *s, size_t len, unsigned seed) {
    for (long k = 0; k < s->jobs; k++)
        if (s->got[k].whole && s->got[k].len == len && s->got[k].seed == seed) return 1;
    return 0;
}

/* One job pushed to the idle worker (registered): it runs with its bytes
 * whole. Returns the publishes the push took. */
static long long push_one(test_env *e, seen *s, size_t len, unsigned seed) {
    long before = s->jobs;
    long long pubs = server_calls(e->rc, "publish");
    char *b = make_bytes(len, seed);
    ASSERT_OK(rjq_enqueue(e->q, b, len, NULL, NULL, NULL));
    free(b);
    ASSERT(loop_until_count(e->base, &s->jobs, before + 1, 10000));
    ASSERT(saw(s, len, seed));
    return server_calls(e->rc, "publish") - pubs;
}

TEST(pushed_payloads_of_16_kib_and_1_mib_arrive_whole_and_binary_safe) {
    test_env e;
    env_start(&e, "ps");
    seen s;
    memset(&s, 0, sizeof s);
    rjq_worker_options wo = quiet_worker_options(3);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, check_handler, &s, &w));
    wait_worker_started(e.base, e.c, e.q, e.rc, "ps");
    /* 16 KiB (the largest payload pushed): its own message after its job's */
    ASSERT(push_one(&e, &s, 16384, 1) >= 2);
    /* small: in its job's message, as before */
    push_one(&e, &s, 18, 2);
    /* 1 MiB: too big to push, its id is, and the worker reads it */
    push_one(&e, &s, 1 << 20, 3);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

TEST(several_payloads_that_follow_one_push_reach_their_own_jobs) {
    test_env e;
    env_start(&e, "pm");
    seen s;
    memset(&s, 0, sizeof s);
    rjq_worker_options wo = quiet_worker_options(4);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, check_handler, &s, &w));
    wait_worker_started(e.base, e.c, e.q, e.rc, "pm");
    /* one batch, one push: big, small, big, big (three follow) */
    static const size_t lens[] = {16384, 5, 4096, 9000};
    rjq_enqueue_item items[4];
    char *bytes[4];
    for (int i = 0; i < 4; i++) {
        bytes[i] = make_bytes(lens[i], (unsigned)i + 1);
        items[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        items[i].payload = bytes[i];
        items[i].len = lens[i];
    }
    long long pubs = server_calls(e.rc, "publish");
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 4, NULL, NULL));
    for (int i = 0; i < 4; i++) free(bytes[i]);
    ASSERT(loop_until_count(e.base, &s.jobs, 4, 10000));
    for (int i = 0; i < 4; i++) ASSERT(saw(&s, lens[i], (unsigned)i + 1));
    ASSERT(server_calls(e.rc, "publish") - pubs >= 4); /* (the head, then three payloads) */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

static int cut_after_head(void *arg) {
    return proxy_sub_pass_one_and_cut(arg) == 1;
}

TEST(push_whose_payload_message_is_lost_loses_no_job) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "pl", NULL);
    seen s;
    memset(&s, 0, sizeof s);
    rjq_worker_options wo = quiet_worker_options(1);
    wo.lease_ms = 60000; /* its end is no way back in this test */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, check_handler, &s, &w));
    wait_worker_started(e.base, e.c, e.q, e.rc, "pl");
    /* the push's messages wait in the proxy; only the first (the job's
     * head) gets through, then the subscription drops */
    proxy_hold_sub(&p, 1);
    long long pubs = server_calls(e.rc, "publish");
    char *b = make_bytes(16384, 5);
    ASSERT_OK(rjq_enqueue(e.q, b, 16384, NULL, NULL, NULL));
    free(b);
    ASSERT(loop_until_cond(e.base, cut_after_head, &p, 10000));
    ASSERT(server_calls(e.rc, "publish") - pubs >= 2); /* (a head, then its payload) */
    ASSERT_EQ(0, s.jobs); /* (not without its payload) */
    proxy_hold_sub(&p, 0); /* (the new subscriber connection flows) */
    /* resubscribed, the worker's recovering claim brings the job back
     * (its lease ends in a minute, the reclaim sweep in 10: only recovery
     * is this quick) */
    ASSERT(loop_until_count(e.base, &s.jobs, 1, 10000));
    ASSERT(saw(&s, 16384, 5));
    ASSERT_EQ(1, s.jobs);
    worker_stop_wait(e.base, w);
    env_stop_proxied(&e, &p);
}

/* How many times an enqueue's callback came, and its last status. */
typedef struct answered {
    long calls;
    int status;
} answered;

static void on_answer(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    answered *a = data;
    (void)c, (void)jobs, (void)n;
    a->calls++;
    a->status = status;
}

/* The lean enqueue (one anonymous job: enqueue_one.lua) is made in its
 * batch's own buffer around the payload where it lies, and the request
 * takes that buffer, writing the script's head in the room in front of
 * the arguments (send_one, rjq__script_take_at): no copy of either. Its
 * bytes land whole, made before the session is up (the request waits in
 * the backlog; its head is rewritten in place if the session's form
 * differs) and after; a request whose connection is killed under it, or
 * whose client is freed with it unanswered, ends once and leaks nothing
 * (ASan and valgrind runs of this test). */
TEST(lean_enqueues_taking_their_buffer_land_16_kib_and_1_mib_exact_and_leak_nothing) {
    test_env e;
    env_open(&e, "pt", NULL);
    seen s;
    memset(&s, 0, sizeof s);
    answered a[4];
    memset(a, 0, sizeof a);
    /* made while the client is still connecting */
    char *b16 = make_bytes(16384, 1), *b1m = make_bytes(1 << 20, 2);
    ASSERT_OK(rjq_enqueue(e.q, b16, 16384, NULL, on_answer, &a[0]));
    loop_turn(e.base); /* (its own batch: one job) */
    ASSERT_OK(rjq_enqueue(e.q, b1m, 1 << 20, NULL, on_answer, &a[1]));
    WAIT_FOR(e.base, a[0].calls == 1 && a[1].calls == 1, 10000);
    ASSERT_OK(a[0].status);
    ASSERT_OK(a[1].status);
    /* made on an established session */
    char *b16b = make_bytes(16384, 3);
    ASSERT_OK(rjq_enqueue(e.q, b16b, 16384, NULL, on_answer, &a[2]));
    WAIT_FOR(e.base, a[2].calls == 1, 10000);
    ASSERT_OK(a[2].status);
    rjq_worker_options wo = quiet_worker_options(3);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, check_handler, &s, &w));
    ASSERT(loop_until_count(e.base, &s.jobs, 3, 10000));
    ASSERT(saw(&s, 16384, 1));
    ASSERT(saw(&s, 1 << 20, 2));
    ASSERT(saw(&s, 16384, 3));
    worker_stop_wait(e.base, w);
    /* its connection killed under it: answered once, whatever the status */
    ASSERT_OK(rjq_enqueue(e.q, b1m, 1 << 20, NULL, on_answer, &a[3]));
    loop_turn(e.base);
    freeReplyObject(server_cmd(e.rc, "CLIENT KILL TYPE normal SKIPME yes"));
    WAIT_FOR(e.base, a[3].calls >= 1, 10000);
    ASSERT_EQ(1, a[3].calls);
    /* freed with one unanswered: its callback once, its buffer freed */
    memset(&a[0], 0, sizeof a[0]);
    WAIT_FOR(e.base, rjq_client_is_connected(e.c), 10000);
    ASSERT_OK(rjq_enqueue(e.q, b1m, 1 << 20, NULL, on_answer, &a[0]));
    loop_turn(e.base);
    rjq_client_free(e.c);
    e.c = NULL;
    ASSERT_EQ(1, a[0].calls);
    free(b16), free(b1m), free(b16b);
    env_stop(&e);
}

/* Every payload length of LEN_FROM..LEN_TO, each once (make_bytes(len,
 * len)): how many came whole, and any that did not. */
#define LEN_FROM 3600
#define LEN_TO 3900
typedef struct by_len {
    long jobs, whole;
    unsigned char got[LEN_TO - LEN_FROM + 1];
} by_len;

static void len_handler(rjq_job *job, void *data) {
    by_len *s = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    s->jobs++;
    if (len >= LEN_FROM && len <= LEN_TO && !s->got[len - LEN_FROM]) {
        char *want = make_bytes(len, (unsigned)len);
        if (memcmp(p, want, len) == 0) s->got[len - LEN_FROM] = 1, s->whole++;
        free(want);
    }
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

/* A lean enqueue's command of 4 KiB or more (RJQ__WRITEOUT_MIN) is written
 * to the socket at once when hiredis holds no output (src/writeout.c),
 * shorter ones through hiredis' buffer: one job of every payload length
 * from 3600 to 3900 bytes (its commands ~3.9 to ~4.2 KiB), each its own request (the next made once the
 * last is answered, so hiredis' buffer is empty at each), makes commands on
 * both sides of that bound and at it: each answered once, and each
 * payload reaches its job byte for byte. */
TEST(lean_enqueues_on_both_sides_of_the_direct_write_bound_land_exact) {
    test_env e;
    env_start(&e, "pw");
    static by_len s;
    memset(&s, 0, sizeof s);
    static answered a[LEN_TO - LEN_FROM + 1];
    memset(a, 0, sizeof a);
    for (size_t len = LEN_FROM; len <= LEN_TO; len++) {
        char *b = make_bytes(len, (unsigned)len);
        ASSERT_OK(rjq_enqueue(e.q, b, len, NULL, on_answer, &a[len - LEN_FROM]));
        free(b);
        WAIT_FOR(e.base, a[len - LEN_FROM].calls == 1, 10000);
    }
    long n = LEN_TO - LEN_FROM + 1;
    rjq_worker_options wo = quiet_worker_options(8);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, len_handler, &s, &w));
    ASSERT(loop_until_count(e.base, &s.jobs, n, 30000));
    for (long i = 0; i < n; i++) {
        ASSERT_EQ(1, a[i].calls);
        ASSERT_OK(a[i].status);
    }
    ASSERT_EQ(n, s.whole);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}
