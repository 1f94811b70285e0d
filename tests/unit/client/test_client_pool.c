/*
 * The client pool and the drain of unread bodies, against a loopback peer
 * that lives in the test's own event loop: a listening socket on 127.0.0.1
 * whose connections answer every request with a scripted reply, and whose
 * last connection the test can write more bytes to (the rest of a body).
 * What is checked is what the pool promises: a connection is reused after a
 * body read to its end or drained (at once or in the background), handed
 * over to a request that waited for the drain, and not reused after an
 * oversize or stalled body, Connection: close, or once idle_timeout passed.
 */
#include "client.h"
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define PEER_MAX 16

struct peer {
    struct ev_loop *loop;
    int lfd;
    uint16_t port;
    ev_io accept_w;
    ev_io rw[PEER_MAX];
    char in[PEER_MAX][2048];
    size_t inlen[PEER_MAX];
    int accepted; /* connections accepted */
    int requests; /* requests answered */
    int last;     /* slot of the connection that got the last request */
    const char *reply;
};

static struct peer peer;

static void peer_write(int fd, const char *s)
{
    size_t len = strlen(s), off = 0;
    while (off < len) {
        ssize_t n = write(fd, s + off, len - off);
        if (n <= 0)
            return;
        off += (size_t)n;
    }
}

static void on_peer_read(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    int i = (int)(w - peer.rw);
    size_t *len = &peer.inlen[i];
    ssize_t n = read(w->fd, peer.in[i] + *len, sizeof peer.in[i] - 1 - *len);
    if (n <= 0) {
        ev_io_stop(loop, w);
        close(w->fd);
        return;
    }
    *len += (size_t)n;
    peer.in[i][*len] = 0;
    char *end;
    while ((end = strstr(peer.in[i], "\r\n\r\n"))) { /* GETs: no request bodies */
        size_t used = (size_t)(end + 4 - peer.in[i]);
        memmove(peer.in[i], end + 4, *len - used + 1);
        *len -= used;
        peer.requests++;
        peer.last = i;
        peer_write(w->fd, peer.reply);
    }
}

static void on_peer_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    int fd = accept(w->fd, NULL, NULL);
    if (fd < 0)
        return;
    if (peer.accepted == PEER_MAX) {
        close(fd);
        return;
    }
    int i = peer.accepted++;
    peer.inlen[i] = 0;
    ev_io_init(&peer.rw[i], on_peer_read, fd, EV_READ);
    ev_io_start(loop, &peer.rw[i]);
}

static void peer_start(struct ev_loop *loop)
{
    memset(&peer, 0, sizeof peer);
    peer.loop = loop;
    peer.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (peer.lfd < 0 || bind(peer.lfd, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(peer.lfd, 16) < 0 || getsockname(peer.lfd, (struct sockaddr *)&a, &alen) < 0) {
        perror("peer");
        exit(2);
    }
    peer.port = ntohs(a.sin_port);
    ev_io_init(&peer.accept_w, on_peer_accept, peer.lfd, EV_READ);
    ev_io_start(loop, &peer.accept_w);
}

static void peer_stop(void)
{
    for (int i = 0; i < peer.accepted; i++)
        if (ev_is_active(&peer.rw[i])) {
            ev_io_stop(peer.loop, &peer.rw[i]);
            close(peer.rw[i].fd);
        }
    ev_io_stop(peer.loop, &peer.accept_w);
    close(peer.lfd);
}

/* ---- the client side ------------------------------------------------------ */

struct exchange {
    struct mh_client_req r;
    bool head, body;
};

static void on_event(struct mh_client_req *r, enum mh_client_event ev)
{
    struct exchange *x = r->ud;
    if (ev == MH_CLIENT_HEAD)
        x->head = true;
    else
        x->body = true;
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
}

/* Runs the loop until *flag (NULL: for `seconds`) or `seconds` passed. */
static void run_until(struct ev_loop *loop, const bool *flag, double seconds)
{
    ev_timer tick;
    ev_timer_init(&tick, on_tick, 0.005, 0.005);
    ev_timer_start(loop, &tick);
    ev_now_update(loop);
    double end = ev_now(loop) + seconds;
    while (!(flag && *flag) && ev_now(loop) < end)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &tick);
}

static const char request[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/* Starts a GET on the pool. */
static void start(struct mh_client_pool *p, struct exchange *x)
{
    memset(x, 0, sizeof *x);
    x->r.pool = p;
    strcpy(x->r.host, "127.0.0.1");
    x->r.port = peer.port;
    x->r.data = request;
    x->r.len = sizeof request - 1;
    x->r.idempotent = true;
    x->r.timeout = 2;
    x->r.on_event = on_event;
    x->r.ud = x;
    mh_client_start(&x->r);
}

/* Starts a GET on the pool; returns once the head (or an error) came. */
static void fetch(struct ev_loop *loop, struct mh_client_pool *p, struct exchange *x)
{
    start(p, x);
    run_until(loop, &x->head, 2);
}

/* Reads the whole body; true when it is `want`. */
static bool read_all(struct ev_loop *loop, struct exchange *x, const char *want)
{
    if (mh_client_body_want(&x->r, true))
        run_until(loop, &x->body, 2);
    size_t len;
    const char *b = mh_client_body(&x->r, &len);
    return !x->r.err && len == strlen(want) && memcmp(b, want, len) == 0;
}

static struct mh_client_pool *pool_new(struct ev_loop *loop,
                                       void (*tune)(struct mh_client_settings *))
{
    struct mh_client_settings s;
    mh_client_settings_init(&s);
    if (tune)
        tune(&s);
    return mh_client_pool_new(loop, &s);
}

/* Each test's fixture: a fresh peer answering every request with reply, and a
 * pool tuned by tune (NULL: the defaults) on loop. tear_down undoes both. */
static struct mh_client_pool *set_up(struct ev_loop *loop, const char *reply,
                                     void (*tune)(struct mh_client_settings *))
{
    peer_start(loop);
    peer.reply = reply;
    return pool_new(loop, tune);
}

static void tear_down(struct mh_client_pool *p)
{
    mh_client_pool_unref(p);
    peer_stop();
}

static const struct mh_client_stats *stats(struct mh_client_pool *p, size_t *idle, size_t *open)
{
    return mh_client_pool_stats(p, idle, open);
}

static const char hello[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

static void test_reuse_after_body_read(struct ev_loop *loop)
{
    struct mh_client_pool *p = set_up(loop, hello, NULL);
    struct exchange x;
    size_t idle, open;
    for (int i = 0; i < 3; i++) {
        fetch(loop, p, &x);
        CHECK(x.head && !x.r.err && x.r.status == 200);
        CHECK(read_all(loop, &x, "hello"));
        mh_client_req_finish(&x.r);
        stats(p, &idle, &open);
        CHECK(idle == 1 && open == 1);
    }
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECKF(st->dials == 1 && st->reuses == 2, "dials %lu reuses %lu", st->dials, st->reuses);
    CHECK(peer.accepted == 1 && peer.requests == 3);
    tear_down(p);
}

/* A body left unread but already buffered is consumed at finish: the connection is reused. */
static void test_reuse_after_unread_buffered_body(struct ev_loop *loop)
{
    struct mh_client_pool *p = set_up(loop, hello, NULL);
    struct exchange x;
    fetch(loop, p, &x);
    run_until(loop, NULL, 0.02); /* the 5 body bytes are in the socket by now */
    mh_client_req_finish(&x.r);
    fetch(loop, p, &x);
    CHECK(x.head && x.r.status == 200);
    CHECK(read_all(loop, &x, "hello"));
    mh_client_req_finish(&x.r);
    size_t idle, open;
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECKF(st->dials == 1 && st->reuses == 1, "dials %lu reuses %lu", st->dials, st->reuses);
    CHECK(st->closes_no_drain == 0 && peer.accepted == 1);
    tear_down(p);
}

static const char head10[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";

/* The rest of an unread body comes after finish: drained in the background, then parked. */
static void test_background_drain(struct ev_loop *loop)
{
    struct mh_client_pool *p = set_up(loop, head10, NULL);
    struct exchange x;
    fetch(loop, p, &x);
    CHECK(x.head && x.r.status == 200);
    mh_client_req_finish(&x.r);
    size_t idle, open;
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECK(idle == 0 && open == 1 && st->drains_done == 0); /* draining */
    peer_write(peer.rw[peer.last].fd, "0123456789");
    run_until(loop, NULL, 0.03);
    st = stats(p, &idle, &open);
    CHECKF(st->drains_done == 1 && idle == 1, "drains_done %lu idle %zu", st->drains_done, idle);
    fetch(loop, p, &x);
    mh_client_req_finish(&x.r);
    CHECK(st->reuses == 1 && peer.accepted == 1);
    tear_down(p);
}

static void long_drain_wait(struct mh_client_settings *s)
{
    s->drain_wait = 1.0;
    s->drain_timeout = 1.0;
}

/* A request started while a drain runs waits for it and gets the drained connection. */
static void test_drain_handover(struct ev_loop *loop)
{
    struct mh_client_pool *p = set_up(loop, head10, long_drain_wait);
    struct exchange x, y;
    fetch(loop, p, &x);
    mh_client_req_finish(&x.r);
    start(p, &y);
    run_until(loop, NULL, 0.05); /* waits (drain_wait): the peer has not finished the body */
    CHECK(!y.head && peer.accepted == 1);
    peer.reply = hello;
    peer_write(peer.rw[peer.last].fd, "0123456789");
    run_until(loop, &y.head, 1);
    CHECK(y.head && !y.r.err && y.r.status == 200);
    CHECK(read_all(loop, &y, "hello"));
    mh_client_req_finish(&y.r);
    size_t idle, open;
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECKF(st->dials == 1 && st->reuses == 1 && st->drains_done == 1,
           "dials %lu reuses %lu drains_done %lu", st->dials, st->reuses, st->drains_done);
    CHECK(peer.accepted == 1 && idle == 1);
    tear_down(p);
}

static void small_drain(struct mh_client_settings *s)
{
    s->drain_bytes = 100;
}

/* A Content-Length over drain_bytes is not drained: closed at finish, the next request dials. */
static void test_no_reuse_after_oversize_body(struct ev_loop *loop)
{
    struct mh_client_pool *p =
        set_up(loop, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789", small_drain);
    struct exchange x;
    fetch(loop, p, &x);
    CHECK(x.head && x.r.status == 200);
    mh_client_req_finish(&x.r);
    size_t idle, open;
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECK(st->closes_no_drain == 1 && idle == 0 && open == 0);
    fetch(loop, p, &x);
    mh_client_req_finish(&x.r);
    CHECKF(st->dials == 2 && st->reuses == 0, "dials %lu reuses %lu", st->dials, st->reuses);
    run_until(loop, NULL, 0.01);
    CHECK(peer.accepted == 2);
    tear_down(p);
}

static void short_drain(struct mh_client_settings *s)
{
    s->drain_timeout = 0.05;
    s->drain_wait = 0;
}

/* A body that stops coming is abandoned at drain_timeout: closed, never reused. */
static void test_no_reuse_after_stalled_drain(struct ev_loop *loop)
{
    struct mh_client_pool *p = set_up(loop, head10, short_drain);
    struct exchange x;
    fetch(loop, p, &x);
    peer_write(peer.rw[peer.last].fd, "01234"); /* half the body, then nothing */
    mh_client_req_finish(&x.r);
    run_until(loop, NULL, 0.15);
    size_t idle, open;
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECKF(st->drains_abandoned == 1 && idle == 0 && open == 0, "abandoned %lu idle %zu open %zu",
           st->drains_abandoned, idle, open);
    fetch(loop, p, &x);
    mh_client_req_finish(&x.r);
    CHECK(st->dials == 2 && st->reuses == 0);
    tear_down(p);
}

static void drain_off(struct mh_client_settings *s)
{
    s->drain_bytes = 0;
}

/* drain_bytes = 0: any unread byte closes the connection. */
static void test_drain_off(struct ev_loop *loop)
{
    struct mh_client_pool *p = set_up(loop, hello, drain_off);
    struct exchange x;
    fetch(loop, p, &x);
    mh_client_req_finish(&x.r);
    size_t idle, open;
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECK(st->closes_no_drain == 1 && idle == 0 && open == 0);
    tear_down(p);
}

/* Connection: close is honoured even for a body read to its end. */
static void test_no_reuse_after_connection_close(struct ev_loop *loop)
{
    struct mh_client_pool *p = set_up(
        loop, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello", NULL);
    struct exchange x;
    fetch(loop, p, &x);
    CHECK(read_all(loop, &x, "hello"));
    mh_client_req_finish(&x.r);
    size_t idle, open;
    stats(p, &idle, &open);
    CHECK(idle == 0 && open == 0);
    tear_down(p);
}

static void short_idle(struct mh_client_settings *s)
{
    s->idle_timeout = 0.2;
}

/* An idle connection is closed after idle_timeout; the next request dials. */
static void test_idle_expiry(struct ev_loop *loop)
{
    struct mh_client_pool *p = set_up(loop, hello, short_idle);
    struct exchange x;
    fetch(loop, p, &x);
    CHECK(read_all(loop, &x, "hello"));
    mh_client_req_finish(&x.r);
    size_t idle, open;
    stats(p, &idle, &open);
    CHECK(idle == 1);
    run_until(loop, NULL, 0.02);
    stats(p, &idle, &open);
    CHECK(idle == 1); /* not yet */
    run_until(loop, NULL, 0.35);
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECKF(idle == 0 && open == 0, "idle %zu open %zu", idle, open);
    fetch(loop, p, &x);
    CHECK(read_all(loop, &x, "hello"));
    mh_client_req_finish(&x.r);
    CHECK(st->dials == 2 && st->reuses == 0);
    tear_down(p);
}

/*
 * An idle connection the server closed, or wrote to (a 408: HTTP/1.1 allows
 * neither reading nor reuse then). With a loop iteration in between, the
 * idle watcher has closed it: the next request dials. Without one, the pool
 * takes it without a look (no system call per reuse); the request meets the
 * close or the 408 and is sent again on a fresh connection, once.
 */
static void test_no_reuse_after_server_spoke(struct ev_loop *loop, bool close_it, bool poll)
{
    struct mh_client_pool *p = set_up(loop, hello, NULL);
    struct exchange x;
    fetch(loop, p, &x);
    CHECK(read_all(loop, &x, "hello"));
    mh_client_req_finish(&x.r);
    ev_io *conn = &peer.rw[peer.last];
    if (close_it) {
        ev_io_stop(loop, conn);
        close(conn->fd);
    } else {
        peer_write(conn->fd, "HTTP/1.1 408 Request Timeout\r\n\r\n");
    }
    usleep(20000); /* the bytes or the FIN reach our socket */
    if (poll)
        ev_run(loop, EVRUN_NOWAIT);
    start(p, &x);
    run_until(loop, &x.head, 2);
    CHECK(x.head && !x.r.err && x.r.status == 200);
    CHECK(read_all(loop, &x, "hello"));
    mh_client_req_finish(&x.r);
    size_t idle, open;
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECKF(st->dials == 2 && st->reuses == (poll ? 0 : 1) && st->retries == (poll ? 0 : 1),
           "dials %lu reuses %lu retries %lu", st->dials, st->reuses, st->retries);
    CHECK(peer.accepted == 2);
    tear_down(p);
}

static void one_idle_per_host(struct mh_client_settings *s)
{
    s->max_idle_per_host = 1;
}

/* Two connections finish; max_idle_per_host = 1 keeps the most recent one only. */
static void test_max_idle_per_host(struct ev_loop *loop)
{
    struct mh_client_pool *p = set_up(loop, hello, one_idle_per_host);
    struct exchange x, y;
    fetch(loop, p, &x);
    fetch(loop, p, &y); /* x still holds its connection: a second one is dialed */
    CHECK(read_all(loop, &x, "hello") && read_all(loop, &y, "hello"));
    mh_client_req_finish(&x.r);
    mh_client_req_finish(&y.r);
    size_t idle, open;
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECKF(st->dials == 2 && idle == 1 && open == 1, "dials %lu idle %zu open %zu", st->dials, idle,
           open);
    tear_down(p);
}

static void one_idle(struct mh_client_settings *s)
{
    s->max_idle = 1;
}

/* Two hosts park one connection each; max_idle = 1 keeps the most recently parked only. */
static void test_max_idle(struct ev_loop *loop)
{
    struct mh_client_pool *p = set_up(loop, hello, one_idle);
    struct exchange x, y;
    fetch(loop, p, &x);
    memset(&y, 0, sizeof y);
    y.r = x.r; /* the same request to another name of the peer: another host of the pool */
    y.r.ud = &y;
    y.r.conn = NULL;
    y.r.err = NULL;
    y.r._deadline = 0;
    strcpy(y.r.host, "localhost");
    mh_client_start(&y.r);
    run_until(loop, &y.head, 2);
    CHECKF(y.head && !y.r.err, "%s", y.r.err ? y.r.err : "no head");
    CHECK(read_all(loop, &x, "hello") && read_all(loop, &y, "hello"));
    mh_client_req_finish(&x.r);
    mh_client_req_finish(&y.r);
    size_t idle, open;
    const struct mh_client_stats *st = stats(p, &idle, &open);
    CHECKF(st->dials == 2 && idle == 1 && open == 1, "dials %lu idle %zu open %zu", st->dials, idle,
           open);
    /* the one kept is localhost's, parked last */
    y.head = y.body = false;
    y.r._deadline = 0;
    mh_client_start(&y.r);
    run_until(loop, &y.head, 2);
    CHECK(read_all(loop, &y, "hello"));
    mh_client_req_finish(&y.r);
    CHECKF(st->dials == 2 && st->reuses == 1, "dials %lu reuses %lu", st->dials, st->reuses);
    tear_down(p);
}

int main(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    test_reuse_after_body_read(loop);
    test_reuse_after_unread_buffered_body(loop);
    test_background_drain(loop);
    test_drain_handover(loop);
    test_no_reuse_after_oversize_body(loop);
    test_no_reuse_after_stalled_drain(loop);
    test_drain_off(loop);
    test_no_reuse_after_connection_close(loop);
    test_idle_expiry(loop);
    test_no_reuse_after_server_spoke(loop, true, true);
    test_no_reuse_after_server_spoke(loop, false, true);
    test_no_reuse_after_server_spoke(loop, true, false);
    test_no_reuse_after_server_spoke(loop, false, false);
    test_max_idle_per_host(loop);
    test_max_idle(loop);
    ev_loop_destroy(loop);
    return unit_report();
}
