/* Push channel messages (push.c: rjq__push_parse, rjq__push_parse_notice):
 * the input is one message, as a subscriber connection hands it over
 * (format 8 too: a job's "><length>" payload follows in a message of its
 * own, which push.c only compares with that length). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "push.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a copy of exactly its size: a read past it is ASan's */
    char *msg = malloc(size ? size : 1);
    if (msg == NULL) return 0;
    memcpy(msg, data, size);
    if (size > 0 && msg[0] == '!') {
        rjq__push_notice n;
        int rc = rjq__push_parse_notice(msg, size, &n);
        MUST(rc == RJQ_OK || rc == RJQ_EPROTO || rc == 1);
        if (rc != RJQ_EPROTO) {
            MUST(n.toklen > 0 && n.idlen > 0);
            touch_in(msg, size, n.token, n.toklen);
            touch_in(msg, size, n.id, n.idlen);
        }
    } else {
        rjq__push_head h;
        rjq__pushed *jobs;
        int rc = rjq__push_parse(msg, size, &h, &jobs);
        MUST(rc == RJQ_OK || rc == RJQ_EPROTO || rc == RJQ_ENOMEM);
        MUST((rc == RJQ_OK) == (jobs != NULL));
        if (rc == RJQ_OK) {
            MUST(h.n > 0 && h.n <= size && h.toklen > 0 && h.follow <= h.n);
            touch_in(msg, size, h.token, h.toklen);
            size_t follow = 0;
            for (size_t i = 0; i < h.n; i++) {
                /* format 8: a payload that follows is NULL with its length (> 0) */
                int follows = jobs[i].payload == NULL && jobs[i].len > 0;
                follow += (size_t)follows;
                MUST(jobs[i].len <= (512ULL << 20));
                MUST(jobs[i].idlen > 0 && jobs[i].deadline > 0 && jobs[i].attempt >= 0 &&
                     jobs[i].max_attempts >= 0 && jobs[i].token == h.token &&
                     jobs[i].check == h.check && (h.check == 0 || h.check == 1));
                keep(jobs[i].deadline - 0x7fffffffffffffffLL); /* take_pushed: - lease_ms */
                touch_in(msg, size, jobs[i].id, jobs[i].idlen);
                if (!follows) touch_in(msg, size, jobs[i].payload, jobs[i].len);
                touch_in(msg, size, jobs[i].headers, jobs[i].hlen);
            }
            MUST(follow == h.follow);
            free(jobs);
        }
    }
    free(msg);
    return 0;
}
