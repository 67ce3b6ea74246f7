/* Redis URLs (url.c: rjq__url_parse), as rjq_client_new and the tools'
 * --url take them, with their query options (?db=, ?password=, ...). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rjq.h"
#include "url.h"

static void touch_str(const char *s) {
    if (s) touch_in(s, strlen(s) + 1, s, strlen(s) + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *url = malloc(size + 1);
    if (url == NULL) return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    rjq__url u;
    char err[256];
    err[0] = '\0';
    int rc = rjq__url_parse(url, &u, err, sizeof err);
    MUST(rc == RJQ_OK || rc == RJQ_EURL || rc == RJQ_ENOMEM);
    if (rc == RJQ_OK) {
        MUST((u.path == NULL) != (u.host == NULL) || u.master != NULL);
        MUST(u.path != NULL || u.master != NULL || (u.port > 0 && u.port <= 65535));
        MUST(u.db >= 0 && u.db <= RJQ__DB_MAX && (u.db == 0 || u.db_given));
        MUST(u.timeout_ms >= 0 && u.timeout_ms <= 86400000L);
        touch_str(u.host), touch_str(u.path), touch_str(u.user), touch_str(u.password);
        touch_str(u.master);
        for (size_t i = 0; i < u.nsentinels; i++) {
            MUST(u.sentinels[i].port > 0 && u.sentinels[i].port <= 65535);
            touch_str(u.sentinels[i].host);
        }
        rjq__url_free(&u);
    } else {
        MUST(strlen(err) > 0 && u.host == NULL && u.path == NULL && u.user == NULL &&
             u.password == NULL && u.master == NULL && u.sentinels == NULL);
    }
    free(url);
    return 0;
}
