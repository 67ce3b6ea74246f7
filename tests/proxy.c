/* The test proxy (proxy.h). */
#include "proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "harness.h"
#include "server.h"

static void proxy_pair_close(proxy_pair *pp) {
    if (pp->cli) bufferevent_free(pp->cli);
    if (pp->srv) bufferevent_free(pp->srv);
    pp->cli = pp->srv = NULL;
}

static void proxy_from_client(struct bufferevent *bev, void *arg) {
    proxy_pair *pp = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (pp->dead) return; /* stays in the input buffer */
    static const char sub[] = "$9\r\nSUBSCRIBE\r\n";
    if (evbuffer_search(in, sub, sizeof sub - 1, NULL).pos >= 0) pp->is_sub = 1;
    bufferevent_write_buffer(pp->srv, in);
}

static void proxy_from_server(struct bufferevent *bev, void *arg) {
    proxy_pair *pp = arg;
    if (pp->dead || (pp->is_sub ? pp->p->hold_sub : pp->p->hold || pp->p->trickle))
        return; /* stays in the input buffer */
    bufferevent_write_buffer(pp->cli, bufferevent_get_input(bev));
}

static void proxy_on_event(struct bufferevent *bev, short what, void *arg) {
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) proxy_pair_close(arg);
}

static void proxy_accept(evutil_socket_t fd, short what, void *arg) {
    proxy *p = arg;
    (void)what;
    int cfd = accept(fd, NULL, NULL);
    if (cfd < 0) return;
    int sfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)p->server_port);
    ASSERT(sfd >= 0);
    ASSERT(connect(sfd, (struct sockaddr *)&a, sizeof a) == 0);
    proxy_pair *pp = NULL;
    for (int i = 0; i < PROXY_PAIRS && !pp; i++)
        if (p->pairs[i].cli == NULL && p->pairs[i].srv == NULL) pp = &p->pairs[i];
    ASSERT(pp != NULL);
    evutil_make_socket_nonblocking(cfd);
    evutil_make_socket_nonblocking(sfd);
    pp->p = p;
    pp->is_sub = 0;
    pp->dead = 0;
    pp->cli = bufferevent_socket_new(p->base, cfd, BEV_OPT_CLOSE_ON_FREE);
    pp->srv = bufferevent_socket_new(p->base, sfd, BEV_OPT_CLOSE_ON_FREE);
    ASSERT(pp->cli != NULL && pp->srv != NULL);
    bufferevent_setcb(pp->cli, proxy_from_client, NULL, proxy_on_event, pp);
    bufferevent_setcb(pp->srv, proxy_from_server, NULL, proxy_on_event, pp);
    bufferevent_enable(pp->cli, EV_READ | EV_WRITE);
    bufferevent_enable(pp->srv, EV_READ | EV_WRITE);
}

void proxy_start(proxy *p, struct event_base *base, int server_port) {
    memset(p, 0, sizeof *p);
    p->base = base;
    p->server_port = server_port;
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(p->lfd >= 0);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT(bind(p->lfd, (struct sockaddr *)&a, sizeof a) == 0);
    ASSERT(listen(p->lfd, 16) == 0);
    ASSERT(getsockname(p->lfd, (struct sockaddr *)&a, &len) == 0);
    evutil_make_socket_nonblocking(p->lfd);
    p->accept_ev = event_new(base, p->lfd, EV_READ | EV_PERSIST, proxy_accept, p);
    ASSERT(p->accept_ev != NULL);
    event_add(p->accept_ev, NULL);
    snprintf(p->url, sizeof p->url, "redis://127.0.0.1:%d", ntohs(a.sin_port));
}

/* Hold back (1) or let through (0, with everything held so far) what Redis
 * sends on the command connection. */
static void release_held(proxy *p) {
    for (int i = 0; i < PROXY_PAIRS; i++) {
        proxy_pair *pp = &p->pairs[i];
        if (pp->cli && pp->srv && !pp->dead && !(pp->is_sub ? p->hold_sub : p->hold))
            bufferevent_write_buffer(pp->cli, bufferevent_get_input(pp->srv));
    }
}

void proxy_hold(proxy *p, int on) {
    p->hold = on;
    if (!on) release_held(p);
}

/* The same on subscriber connections. */
void proxy_hold_sub(proxy *p, int on) {
    p->hold_sub = on;
    if (!on) release_held(p);
}

/* A tick of the trickle: each command connection gets its share. */
static void trickle_tick(evutil_socket_t fd, short what, void *arg) {
    proxy *p = arg;
    (void)fd, (void)what;
    for (int i = 0; i < PROXY_PAIRS; i++) {
        proxy_pair *pp = &p->pairs[i];
        if (pp->cli && pp->srv && !pp->dead && !pp->is_sub && !p->hold) {
            int n = evbuffer_remove_buffer(bufferevent_get_input(pp->srv),
                                           bufferevent_get_output(pp->cli), p->trickle);
            if (n > 0) p->trickled += (size_t)n;
        }
    }
}

void proxy_trickle(proxy *p, size_t bytes, long every_ms) {
    if (p->trickle_ev) event_free(p->trickle_ev);
    p->trickle_ev = NULL;
    p->trickle = bytes;
    if (bytes == 0) {
        release_held(p);
        return;
    }
    p->trickle_ev = event_new(p->base, -1, EV_PERSIST, trickle_tick, p);
    ASSERT(p->trickle_ev != NULL);
    struct timeval tv = {every_ms / 1000, (every_ms % 1000) * 1000};
    event_add(p->trickle_ev, &tv);
}

void proxy_blackhole(proxy *p) {
    for (int i = 0; i < PROXY_PAIRS; i++)
        if (p->pairs[i].cli || p->pairs[i].srv) p->pairs[i].dead = 1;
}

size_t proxy_sub_held(proxy *p) {
    size_t n = 0;
    for (int i = 0; i < PROXY_PAIRS; i++) {
        proxy_pair *pp = &p->pairs[i];
        if (pp->srv && pp->is_sub) n += evbuffer_get_length(bufferevent_get_input(pp->srv));
    }
    return n;
}

/* The length of a whole RESP bulk string "$<n>\r\n<n bytes>\r\n" at b
 * (0: not whole). */
static size_t bulk_len(const unsigned char *b, size_t len) {
    size_t i = 1, n = 0;
    if (len < 4 || b[0] != '$') return 0;
    for (; i < len && b[i] >= '0' && b[i] <= '9'; i++) n = n * 10 + (size_t)(b[i] - '0');
    if (i + 2 > len || b[i] != '\r' || len - i - 2 < n + 2) return 0;
    return i + 2 + n + 2;
}

static void close_when_written(struct bufferevent *bev, void *arg) {
    (void)bev;
    proxy_pair_close(arg);
}

int proxy_sub_pass_one_and_cut(proxy *p) {
    for (int i = 0; i < PROXY_PAIRS; i++) {
        proxy_pair *pp = &p->pairs[i];
        if (!pp->srv || !pp->cli || !pp->is_sub || pp->dead) continue;
        struct evbuffer *in = bufferevent_get_input(pp->srv);
        size_t len = evbuffer_get_length(in);
        if (len == 0) continue;
        const unsigned char *b = evbuffer_pullup(in, -1);
        /* "*3\r\n" (">3\r\n": RESP3) and its three bulk strings */
        if (len < 4 || (b[0] != '*' && b[0] != '>') || b[1] != '3' || b[2] != '\r') return -1;
        size_t at = 4;
        for (int k = 0; k < 3; k++) {
            size_t n = bulk_len(b + at, len - at);
            if (n == 0) return -1;
            at += n;
        }
        bufferevent_write(pp->cli, b, at);
        pp->dead = 1; /* nothing more either way */
        bufferevent_free(pp->srv);
        pp->srv = NULL;
        bufferevent_setcb(pp->cli, NULL, close_when_written, proxy_on_event, pp);
        return 1;
    }
    return 0;
}

void proxy_stop(proxy *p) {
    if (p->trickle_ev) event_free(p->trickle_ev);
    p->trickle_ev = NULL;
    for (int i = 0; i < PROXY_PAIRS; i++) proxy_pair_close(&p->pairs[i]);
    event_free(p->accept_ev);
    close(p->lfd);
}

void env_start_proxied_opts(test_env *e, proxy *p, const char *queue, rjq_client_options *opts) {
    memset(e, 0, sizeof *e);
    server_start_guarded(&e->s, NULL);
    e->base = event_base_new();
    ASSERT(e->base != NULL);
    proxy_start(p, e->base, e->s.port);
    rjq_client_options o = opts ? *opts : client_options(p->url);
    o.url = p->url;
    e->c = client_new(e->base, &o);
    e->q = queue_for(e->c, queue);
    e->rc = server_connect(&e->s);
    wait_connected(e->base, e->c);
    wait_layout_known(e->base, e->q);
}

void env_start_proxied(test_env *e, proxy *p, const char *queue, rjq_event_cb *on_event) {
    rjq_client_options o = client_options("");
    o.on_event = on_event;
    env_start_proxied_opts(e, p, queue, &o);
}

void env_stop_proxied(test_env *e, proxy *p) {
    rjq_client_free(e->c); /* NULL: a harmless no-op */
    e->c = NULL;
    proxy_stop(p);
    env_stop(e);
}
