/* A program outside the rjq tree, built against an installed rjq (by
 * tests/install_consumer.sh, with pkg-config and with find_package): the
 * headers and the loop glue compile, the library links and runs. */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>
#include <rjq.h>
#include <rjq/libevent.h>

int main(void) {
    int want = RJQ_VERSION_MAJOR * 10000 + RJQ_VERSION_MINOR * 100 + RJQ_VERSION_PATCH;
    if (rjq_version() != want) {
        fprintf(stderr, "rjq_version() %d, header %d\n", rjq_version(), want);
        return 1;
    }
    if (strcmp(rjq_strerror(RJQ_EINVAL), "") == 0) return 1;
    struct event_base *base = event_base_new();
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = "redis://127.0.0.1:1"; /* nothing listens: only the set-up is exercised */
    rjq_client *c = NULL;
    int rc = rjq_libevent_client_new(&c, base, &o);
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq_libevent_client_new: %s\n", rjq_strerror(rc));
        return 1;
    }
    rjq_queue *q = NULL;
    if (rjq_queue_open(c, "consumer", NULL, &q) != RJQ_OK) return 1;
    rjq_client_free(c);
    event_base_free(base);
    printf("rjq %d.%d.%d ok\n", RJQ_VERSION_MAJOR, RJQ_VERSION_MINOR, RJQ_VERSION_PATCH);
    return 0;
}
