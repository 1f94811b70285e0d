/*
 * The outbound client's connections and pools (client.h): connecting,
 * keeping idle connections per host for reuse, and draining a response
 * body nobody read in the background so its connection can be reused.
 */
#include "client.h"
#include "client_err.h"

#include <stdlib.h>
#include <string.h>

/* Buffers that grew past this (a big body read whole) are not kept on pooled objects. */
#define KEEP_BUF_MAX (64 * 1024)

static struct mh_client_conn *conn_of(struct mh_idle_conn *i)
{
    return (struct mh_client_conn *)((char *)i - offsetof(struct mh_client_conn, idle));
}

/* ---- watchers ------------------------------------------------------------ */

/* Watchers do not decide how long the loop runs: the worker does (server/worker.c). */
/*
 * ev_io_set tells libev the descriptor may be a new file, so the next loop
 * iteration re-registers it with epoll even when the mask is unchanged (an
 * epoll_ctl per exchange, failing with EEXIST). Only the first arming of a
 * socket needs that; later changes on the same socket use ev_io_modify, and
 * a stop and start within one iteration cost no system call at all.
 */
void mh_client_conn_set_io(struct mh_client_conn *c, int events)
{
    if (events == c->io_events)
        return;
    struct ev_loop *loop = c->pool->loop;
    ev_io_stop(loop, &c->io);
    if (events) {
        if (c->io_fd_set) {
            ev_io_modify(&c->io, events);
        } else {
            ev_io_set(&c->io, c->fd, events);
            c->io_fd_set = true;
        }
        ev_io_start(loop, &c->io);
    }
    c->io_events = events;
}

void mh_client_conn_set_timer(struct mh_client_conn *c, double seconds)
{
    struct ev_loop *loop = c->pool->loop;
    ev_timer_stop(loop, &c->timer);
    if (seconds > 0) {
        ev_timer_set(&c->timer, seconds, 0.);
        ev_timer_start(loop, &c->timer);
    }
}

void mh_client_settings_init(struct mh_client_settings *s)
{
    memset(s, 0, sizeof *s);
    s->max_idle = 256;
    s->max_idle_per_host = 32;
    s->idle_timeout = 90;
    s->drain_bytes = 256 * 1024;
    s->drain_timeout = 0.050;
    s->connect_timeout = 10;
    s->tls_timeout = 10;
    s->tls_verify = true;
    s->tls_resume = true;
    s->drain_wait = 0.002;
}

struct mh_client_pool *mh_client_pool_new(struct ev_loop *loop, const struct mh_client_settings *s)
{
    struct mh_client_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->loop = loop;
    p->s = *s;
    p->refs = 1;
    if (!(p->dialer = mh_dialer_new(loop))) {
        free(p);
        return NULL;
    }
    return p;
}

void mh_client_pool_ref(struct mh_client_pool *p)
{
    p->refs++;
}

void mh_client_pool_unref(struct mh_client_pool *p)
{
    if (--p->refs > 0)
        return;
    while (p->open)
        p->open->exchange->close(p->open);
    while (p->free_conns) {
        struct mh_client_conn *c = p->free_conns;
        p->free_conns = c->anext;
        mh_buf_free(&c->head);
        mh_buf_free(&c->body);
        free(c);
    }
    while (p->hosts) {
        struct mh_client_host *h = p->hosts;
        p->hosts = h->next;
        free(h);
    }
    mh_dialer_free(p->dialer); /* after the connections, whose TLS uses its configuration */
    free(p->s.tls_ca);
    free(p->s.tls_cert);
    free(p->s.tls_key);
    free(p);
}

void mh_client_pool_close_idle(struct mh_client_pool *p)
{
    while (p->idle.head) {
        struct mh_client_conn *c = conn_of(p->idle.head);
        c->exchange->close(c);
    }
}

const struct mh_client_stats *mh_client_pool_stats(const struct mh_client_pool *p, size_t *idle,
                                                   size_t *open)
{
    *idle = p->idle.n;
    *open = p->nopen;
    return &p->stats;
}

struct mh_client_host *mh_client_pool_host(struct mh_client_pool *p, const struct mh_client_req *r)
{
    for (struct mh_client_host *h = p->hosts; h; h = h->next)
        if (h->port == r->port && h->tls == r->tls && strcmp(h->name, r->host) == 0)
            return h;
    struct mh_client_host *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->tls = r->tls;
    h->port = r->port;
    strcpy(h->name, r->host);
    h->next = p->hosts;
    p->hosts = h;
    return h;
}

/*
 * An idle connection is taken as it is, with no system call to see whether
 * it still lives: its read watcher stays armed while it is parked, so a
 * close (or bytes HTTP/1.1 does not allow) seen by any poll since the park
 * has closed it already. What no poll has seen yet, a close on its way
 * (the server's keep-alive timeout ending now), a peek would not see either
 * when it comes after the peek; the exchange deals with it (client.c,
 * conn_fail: resent when nothing was written or the request is idempotent).
 */
struct mh_client_conn *mh_client_pool_take(struct mh_client_pool *p, struct mh_client_host *h)
{
    struct mh_idle_conn *i = mh_idle_take(&p->idle, &h->idle);
    struct mh_client_conn *c = i ? conn_of(i) : NULL;
    if (c) {
        mh_client_conn_set_timer(c, 0);
        mh_client_conn_set_io(c, 0);
        c->state = MH_CC_WRITING;
    }
    return c;
}

static void shrink(struct mh_buf *b)
{
    if (b->cap > KEEP_BUF_MAX)
        mh_buf_free(b);
    b->len = 0;
}

struct mh_client_conn *mh_client_conn_alloc(struct mh_client_pool *p, struct mh_client_host *h,
                                            const struct mh_client_conn_ops *exchange)
{
    struct mh_client_conn *c = p->free_conns;
    if (c) {
        p->free_conns = c->anext;
    } else if (!(c = calloc(1, sizeof *c))) {
        return NULL;
    }
    shrink(&c->head);
    shrink(&c->body);
    c->pool = p;
    c->exchange = exchange;
    c->host = h;
    c->req = NULL;
    c->fd = -1;
    c->io_events = 0;
    c->io_fd_set = false;
    c->tp.ops = NULL;
    c->idle = (struct mh_idle_conn){0};
    c->aprev = NULL;
    c->anext = p->open;
    if (p->open)
        p->open->aprev = c;
    p->open = c;
    p->nopen++;
    return c;
}

void mh_client_pool_park(struct mh_client_conn *c)
{
    struct mh_client_pool *p = c->pool;
    struct mh_client_host *h = c->host;
    if (c->state == MH_CC_DRAINING)
        h->ndraining--;
    c->state = MH_CC_IDLE; /* so closing below, or a handover, sees no drain */
    if (h->drain_waiter) {
        /* A request is waiting for exactly this: hand the connection over. */
        struct mh_client_conn *w = h->drain_waiter;
        struct mh_client_req *r = w->req;
        h->drain_waiter = NULL;
        w->req = NULL;
        r->conn = NULL;
        w->exchange->close(w);
        mh_client_conn_set_timer(c, 0);
        mh_client_conn_set_io(c, 0);
        c->state = MH_CC_WRITING;
        c->exchange->begin(c, r);
        return;
    }
    c->state = MH_CC_WRITING; /* not on the idle lists yet */
    if (p->s.max_idle == 0 || p->s.max_idle_per_host == 0) {
        c->exchange->close(c);
        return;
    }
    shrink(&c->head);
    shrink(&c->body);
    c->state = MH_CC_IDLE;
    mh_idle_park(&p->idle, &h->idle, &c->idle);
    mh_client_conn_set_io(c, EV_READ);
    mh_client_conn_set_timer(c, p->s.idle_timeout);
    struct mh_idle_conn *old;
    while ((old = mh_idle_excess(&p->idle, &h->idle, p->s.max_idle_per_host, p->s.max_idle)))
        conn_of(old)->exchange->close(conn_of(old));
}

/* A response has ended: park the connection if the protocol allows another one on it. */
static void body_complete(struct mh_client_conn *c, unsigned long *counter)
{
    mh_client_conn_set_timer(c, 0);
    if (c->keep_alive && !c->extra_bytes) {
        if (counter)
            (*counter)++;
        mh_client_pool_park(c);
    } else {
        c->exchange->close(c);
    }
}

void mh_client_drain_progress(struct mh_client_conn *c)
{
    struct mh_client_pool *p = c->pool;
    if (c->msg_done) {
        if (!c->keep_alive || c->extra_bytes)
            p->stats.drains_abandoned++;
        body_complete(c, &p->stats.drains_done);
    } else if (c->drained > p->s.drain_bytes) {
        p->stats.drains_abandoned++;
        c->exchange->close(c);
    }
}

/*
 * Closing a response never blocks. In order: a connection the protocol will
 * not reuse (Connection: close, HTTP/1.0 without keep-alive, a body ending
 * at EOF) or one whose remaining Content-Length is over the budget is closed;
 * otherwise what the socket already holds is consumed now, which finishes
 * most small unread bodies on the spot so the next request reuses the
 * connection; what is left drains in the background within drain_bytes and
 * drain_timeout, and the connection is parked idle when the body ends.
 */
void mh_client_req_finish(struct mh_client_req *r)
{
    struct mh_client_conn *c = r->conn;
    r->_want = 0;
    if (!c)
        return;
    struct mh_client_pool *p = c->pool;
    c->req = NULL;
    r->conn = NULL;
    if (c->state != MH_CC_BODY) {
        c->exchange->close(c); /* abandoned before the head: nothing to save */
        return;
    }
    bool unread = c->body.len > 0 || !c->msg_done;
    c->body.len = 0;
    if (unread && p->s.drain_bytes == 0) {
        /* Draining off: what Go before 1.27 did, discard a connection left unread. */
        p->stats.closes_no_drain++;
        c->exchange->close(c);
        return;
    }
    if (c->msg_done) {
        body_complete(c, NULL);
        return;
    }
    bool chunked = (c->parser.flags & F_CHUNKED) != 0;
    if (!c->keep_alive || (!chunked && c->parser.content_length > p->s.drain_bytes)) {
        p->stats.closes_no_drain++;
        c->exchange->close(c);
        return;
    }
    c->state = MH_CC_DRAINING;
    c->host->ndraining++;
    c->drained = 0;
    if (c->exchange->pump(c) < 0)
        return;
    if (c->msg_done) {
        body_complete(c, &p->stats.drains_sync);
        return;
    }
    if (c->drained > p->s.drain_bytes) {
        p->stats.drains_abandoned++;
        c->exchange->close(c);
        return;
    }
    mh_client_conn_set_io(c, EV_READ);
    mh_client_conn_set_timer(c, p->s.drain_timeout);
}
