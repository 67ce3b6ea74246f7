/* Cron expressions (cron.c) and stored schedule specs (schedule.c), as a
 * scheduler reads them back from Redis: each parsed, and when it parses,
 * its next fire times after times around now and at the bounds. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "fuzz.h"
#include "schedule.h"

static const long long afters[] = {0, 1, -1, 1700000000000LL, 1700000000999LL,
                                   (1LL << 62), -(1LL << 62), LLONG_MAX, LLONG_MIN};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *s = malloc(size + 1);
    if (s == NULL) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    rjq__cron c;
    const char *why = NULL;
    if (rjq__cron_parse(s, &c, &why) == 0) {
        /* the offset: from the input, in range or not */
        int offset = size ? (int)data[0] * 12 - 1536 : 0;
        for (size_t i = 0; i < sizeof afters / sizeof afters[0]; i++) {
            long long next = rjq__cron_next(&c, offset, afters[i]);
            MUST(next == -1 || next > afters[i]);
        }
    } else {
        MUST(why != NULL && strlen(why) > 0);
    }
    rjq__spec sp;
    if (rjq__schedule_parse(s, &sp) == 0) {
        MUST(sp.expr_at <= size);
        for (size_t i = 0; i < sizeof afters / sizeof afters[0]; i++) {
            long long next = rjq__schedule_after(&sp, afters[i]);
            MUST(next == -1 || next > afters[i]);
        }
    }
    free(s);
    return 0;
}
