/* Queue event messages (monitor.c: rjq__event_parse): one line per event,
 * split as on_event splits them. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "monitor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *msg = malloc(size ? size : 1);
    if (msg == NULL) return 0;
    memcpy(msg, data, size);
    const char *p = msg, *end = msg + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *line_end = nl ? nl : end;
        char ev[RJQ__EVENT_MAX + 1], id[RJQ_JOB_ID_MAX + 1];
        long long t = -1;
        if (rjq__event_parse(p, (size_t)(line_end - p), ev, id, &t) == 0) {
            MUST(strlen(ev) > 0 && strlen(ev) <= RJQ__EVENT_MAX && strlen(id) <= RJQ_JOB_ID_MAX);
            MUST(t >= 0 && t <= (1LL << 62));
        }
        p = line_end + 1;
    }
    free(msg);
    return 0;
}
