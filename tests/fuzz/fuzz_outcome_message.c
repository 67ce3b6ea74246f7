/* Messages on an await reply channel (await.c): framed ("+" then
 * "<kind> <klen> <blen>\n<key><body>" per outcome) or the older
 * "kind\nkey\nbody", read as on_reply_message reads them. */
#include <stdlib.h>
#include <string.h>

#include "await.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *msg = malloc(size ? size : 1);
    if (msg == NULL) return 0;
    memcpy(msg, data, size);
    char kind[16];
    const char *key, *body;
    size_t klen, blen;
    if (size > 0 && msg[0] == '+') {
        for (size_t off = 1, used; off < size; off += used) {
            used = rjq__await_parse_framed(msg + off, size - off, kind, sizeof kind, &key, &klen,
                                           &body, &blen);
            if (used == 0) break;
            MUST(used <= size - off && strlen(kind) < sizeof kind);
            touch_in(msg + off, used, key, klen);
            touch_in(msg + off, used, body, blen);
        }
    } else if (rjq__await_parse_message(msg, size, kind, sizeof kind, &key, &klen, &body, &blen) == 0) {
        MUST(strlen(kind) < sizeof kind);
        touch_in(msg, size, key, klen);
        touch_in(msg, size, body, blen);
    }
    free(msg);
    return 0;
}
