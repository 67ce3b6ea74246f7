/* The process registry's reply (processes.c: rjq__processes_parse, with
 * each client's info text): RESP bytes, read into replies by hiredis'
 * reader as a connection would. */
#include <string.h>

#include <hiredis/hiredis.h>

#include "fuzz.h"
#include "processes.h"

static void touch_str(const char *s) {
    MUST(s != NULL);
    touch_in(s, strlen(s) + 1, s, strlen(s) + 1);
}

static void check(const redisReply *r) {
    rjq_process *list;
    size_t n;
    int rc = rjq__processes_parse(r, &list, &n);
    MUST(rc == RJQ_OK || rc == RJQ_EPROTO || rc == RJQ_ENOMEM);
    MUST((rc == RJQ_OK) == (list != NULL));
    if (rc != RJQ_OK) return;
    for (size_t i = 0; i < n; i++) {
        const rjq_process *p = rjq_process_get(list, i);
        touch_str(p->id), touch_str(p->host), touch_str(p->name);
        MUST(p->pid >= 0 && p->started_ms >= 0 && p->started_ms <= (1LL << 62));
        MUST(p->alive_until_ms >= 0 && p->alive_until_ms <= (1LL << 62));
        for (size_t k = 0; k < p->nqueues; k++) {
            const rjq_process_queue *q = rjq_process_queue_get(p->queues, k);
            touch_str(q->queue);
            MUST(q->concurrency >= 0 && q->running >= 0 && q->njobs <= RJQ_PROCESS_JOBS_MAX);
            for (size_t j = 0; j < q->njobs; j++) touch_str(q->jobs[j]);
        }
    }
    free(list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!counts_fit(data, size)) return 0;
    redisReader *rd = redisReaderCreate();
    if (rd == NULL) return 0;
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK) {
        void *reply = NULL;
        while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply != NULL) {
            check(reply);
            freeReplyObject(reply);
            reply = NULL;
        }
    }
    redisReaderFree(rd);
    return 0;
}
