#include "client.h"
#include "client_err.h"

#include "client_tls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A response head beyond this is refused ("oversize head"). */
#define MAX_HEAD (64 * 1024)
/* Body bytes buffered ahead of the reader before reading pauses (TCP back-pressure). */
#define BODY_HIGH_WATER (64 * 1024)
#define READ_CHUNK      (16 * 1024)

static const llhttp_settings_t *parser_settings(void);
static void conn_fail(struct mh_client_conn *c, const char *err);
static void resend(struct mh_client_conn *c, struct mh_client_req *r);
static void conn_write(struct mh_client_conn *c);
static void conn_dial(struct mh_client_conn *c);

/* Arms the timer for a phase: the phase's own limit, capped by the request deadline. */
static void arm_phase_timer(struct mh_client_conn *c, double phase)
{
    struct mh_client_req *r = c->req;
    double left = 0;
    if (r && r->_deadline > 0) {
        left = r->_deadline - ev_now(c->pool->loop);
        if (left < 0.001)
            left = 0.001;
    }
    if (phase > 0 && (left == 0 || phase < left))
        left = phase;
    mh_client_conn_set_timer(c, left);
}

/* Tells the exchange what it asked for, once. */
static void notify(struct mh_client_req *r, enum mh_client_event ev)
{
    if (r->_want != (int)ev + 1)
        return;
    r->_want = 0;
    r->on_event(r, ev);
}

/* ---- the parser ---------------------------------------------------------- */

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    struct mh_client_conn *c = p->data;
    if (c->head.len + len > MAX_HEAD) {
        c->head_overflow = true;
        return HPE_USER;
    }
    return mh_buf_append(&c->head, at, len) < 0 ? HPE_USER : 0;
}

static int on_header_end(llhttp_t *p)
{
    struct mh_client_conn *c = p->data;
    return mh_buf_append(&c->head, "", 1) < 0 ? HPE_USER : 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct mh_client_conn *c = p->data;
    struct mh_client_req *r = c->req;
    if (!r)
        return 0;
    if (p->status_code >= 100 && p->status_code < 200 && p->status_code != 101) {
        /*
         * An interim response (100 Continue, 103 Early Hints: RFC 9110
         * §15.2) has no body and is followed by the final one on the same
         * connection: forget its head and parse on.
         */
        c->interim = true;
        c->head.len = 0;
        return 0;
    }
    c->head_end = c->head.len; /* llhttp adds a chunked body's trailers after it */
    r->status = p->status_code;
    r->http_major = p->http_major;
    r->http_minor = p->http_minor;
    r->head_done = true;
    c->keep_alive = llhttp_should_keep_alive(p) && !llhttp_message_needs_eof(p);
    /* A HEAD response announces a length but carries no body. */
    return r->is_head ? 1 : 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct mh_client_conn *c = p->data;
    if (c->state == MH_CC_DRAINING || !c->req) {
        c->drained += len;
        return 0;
    }
    return mh_buf_append(&c->body, at, len) < 0 ? HPE_USER : 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct mh_client_conn *c = p->data;
    if (c->interim) {
        c->interim = false;
        return 0;
    }
    c->msg_done = true;
    if (c->req)
        c->req->body_done = true;
    return HPE_PAUSED; /* anything after the response is a protocol error */
}

static const llhttp_settings_t *parser_settings(void)
{
    static llhttp_settings_t s;
    static bool ready;
    if (!ready) {
        llhttp_settings_init(&s);
        s.on_header_field = on_header_field;
        s.on_header_value = on_header_field;
        s.on_header_field_complete = on_header_end;
        s.on_header_value_complete = on_header_end;
        s.on_headers_complete = on_headers_complete;
        s.on_body = on_body;
        s.on_message_complete = on_message_complete;
        ready = true;
    }
    return &s;
}

/* ---- reading ------------------------------------------------------------- */

/* The readiness a transport that got EAGAIN waits for. */
static int wait_event(const struct mh_transport *tp, bool reading)
{
    if (reading)
        return tp->wants & MH_TRANSPORT_READ_WANTS_WRITE ? EV_WRITE : EV_READ;
    return tp->wants & MH_TRANSPORT_WRITE_WANTS_READ ? EV_READ : EV_WRITE;
}

/* A read from the transport: >0 bytes, 0 EOF, MH_TLS_WANT_* or MH_TLS_ERROR (errno kept). */
static ssize_t conn_recv(struct mh_client_conn *c, char *buf, size_t n)
{
    for (;;) {
        ssize_t got = mh_transport_read(&c->tp, buf, n);
        if (got >= 0)
            return got;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return wait_event(&c->tp, true) == EV_READ ? MH_TLS_WANT_READ : MH_TLS_WANT_WRITE;
        return MH_TLS_ERROR;
    }
}

static const char *parse_error(struct mh_client_conn *c, llhttp_errno_t e)
{
    if (e == HPE_USER)
        return c->head_overflow ? mh_client_err_head_too_large : mh_client_err_nomem;
    if (!c->req || !c->req->head_done) {
        if (e == HPE_INVALID_CONSTANT || e == HPE_INVALID_VERSION || e == HPE_INVALID_STATUS)
            return mh_client_err_bad_status;
        return mh_client_err_bad_head;
    }
    if (e == HPE_INVALID_CHUNK_SIZE || e == HPE_STRICT)
        return mh_client_err_bad_chunked;
    return mh_client_err_bad_body;
}

/* Feeds bytes to the parser. Returns NULL or an error. */
static const char *conn_parse(struct mh_client_conn *c, const char *data, size_t n)
{
    if (c->msg_done) {
        c->extra_bytes = true;
        return NULL;
    }
    llhttp_errno_t e = llhttp_execute(&c->parser, data, n);
    if (e == HPE_PAUSED) {
        const char *stop = llhttp_get_error_pos(&c->parser);
        if (stop && stop < data + n)
            c->extra_bytes = true;
        return NULL;
    }
    if (e != HPE_OK)
        return parse_error(c, e);
    return NULL;
}

static const char *eof_error(struct mh_client_conn *c)
{
    if (!c->msg_done) {
        llhttp_errno_t e = llhttp_finish(&c->parser);
        if ((e == HPE_OK || e == HPE_PAUSED) && c->msg_done)
            return NULL;
        if (!c->got_byte)
            return mh_client_err_closed_before;
        if (!c->req || !c->req->head_done)
            return mh_client_err_closed_head;
        return mh_client_err_closed_body;
    }
    return NULL;
}

/*
 * Reads whatever the socket holds now (until it would block, the body buffer
 * fills, or the message ends) and parses it.
 */
int mh_client_conn_pump(struct mh_client_conn *c)
{
    char buf[READ_CHUNK];
    int progress = 0;
    while (!c->msg_done) {
        if (c->req && c->body.len >= BODY_HIGH_WATER && !(c->req->_want_all))
            break;
        if (c->state == MH_CC_DRAINING && c->drained > c->pool->s.drain_bytes)
            break;
        ssize_t n = conn_recv(c, buf, sizeof buf);
        if (n == MH_TLS_WANT_READ || n == MH_TLS_WANT_WRITE)
            return progress;
        if (n == MH_TLS_ERROR) {
            conn_fail(c, c->got_byte ? mh_client_err_reset_middle : mh_client_err_reset_before);
            return -1;
        }
        if (n == 0) {
            const char *err = eof_error(c);
            if (err) {
                conn_fail(c, err);
                return -1;
            }
            c->keep_alive = false;
            return 1;
        }
        c->got_byte = true;
        progress = 1;
        const char *err = conn_parse(c, buf, (size_t)n);
        if (err) {
            conn_fail(c, err);
            return -1;
        }
    }
    return 1;
}

/*
 * What the reader side wants from the socket now. A pause (the body buffer
 * is full until the caller consumes) stops the read clock, leaving only the
 * total deadline: a slow consumer is not a stalled server. Reading again
 * starts it afresh.
 */
static void update_read_interest(struct mh_client_conn *c)
{
    struct mh_client_req *r = c->req;
    bool want =
        !c->msg_done && (!r || !r->head_done || c->body.len < BODY_HIGH_WATER || r->_want_all);
    int events = want ? EV_READ : 0;
    if (r && !c->msg_done && events != c->io_events)
        arm_phase_timer(c, want ? r->read_timeout : 0);
    /*
     * A complete response on a connection that will be parked: keep
     * watching it, as the pool does an idle one, rather than stop the
     * watcher now and start it again at the park (an epoll_ctl per
     * exchange). Input from here on is handled by after_message_input.
     */
    if (c->msg_done && c->keep_alive && !c->extra_bytes && c->io_events == EV_READ)
        return;
    mh_client_conn_set_io(c, events);
}

/*
 * Readable after the response ended, before the exchange let the connection
 * go: the server closed it or sent bytes it had no right to. Either way it
 * is not parked; stop watching so the level-triggered event does not spin.
 * A TLS session ticket is consumed and changes nothing.
 */
static void after_message_input(struct mh_client_conn *c)
{
    if (mh_client_conn_idle_input(c))
        return;
    c->keep_alive = false;
    mh_client_conn_set_io(c, 0);
}

static void conn_on_input(struct mh_client_conn *c)
{
    struct mh_client_req *r = c->req;
    if (c->msg_done && c->state == MH_CC_BODY) {
        after_message_input(c);
        return;
    }
    int progress = mh_client_conn_pump(c);
    if (progress < 0)
        return; /* conn_fail told the exchange */
    if (progress > 0 && !c->msg_done)
        arm_phase_timer(c, r->read_timeout); /* a read: the clock between two reads restarts */
    if (r->head_done && c->state == MH_CC_HEAD) {
        /*
         * A 408 on a reused connection is the server's notice that it closes
         * the idle connection (it came before the request, unseen: the pool
         * takes connections without a look). The server did not act on the
         * request (RFC 9110 §15.5.9 lets a client repeat it), so any method
         * is resent once when its body can be sent again.
         */
        if (r->status == 408 && c->reused && !r->_retried && !r->stream) {
            resend(c, r);
            return;
        }
        c->state = MH_CC_BODY;
        notify(r, MH_CLIENT_HEAD);
    }
    if (c->state == MH_CC_BODY) {
        if (c->msg_done)
            mh_client_conn_set_timer(c, 0);
        update_read_interest(c);
        if (c->msg_done || c->body.len >= (r->_want_all ? SIZE_MAX : 1))
            notify(r, MH_CLIENT_BODY);
    }
}

/* ---- failure and retry --------------------------------------------------- */

/* Closes r's stale connection and sends r once more on a fresh one. */
static void resend(struct mh_client_conn *c, struct mh_client_req *r)
{
    c->req = NULL;
    r->conn = NULL;
    mh_client_conn_close(c);
    r->_retried = true;
    r->pool->stats.retries++;
    mh_client_start(r);
}

/*
 * The connection is unusable. A request that failed on a reused connection
 * before any response byte came back may have met a keep-alive close race
 * (the server closed the idle connection as the request went out; the pool
 * takes connections without a look, client_pool.c): it is sent once more on
 * a fresh connection when that is safe, by the line Go's Transport and
 * nginx's proxy_next_upstream draw:
 * - nothing of it was written (the first write failed: the server's reset
 *   was in): the server never saw it, whatever the method, and a streamed
 *   body has not been asked for a piece yet;
 * - it was written and the method is idempotent (GET, HEAD, PUT, DELETE,
 *   OPTIONS, with no streamed body): sending it twice changes nothing more
 *   than sending it once.
 * A POST that was written is not resent: the server may have acted on it
 * before it closed (a crash mid-request looks the same as an idle close),
 * and a second charge or a second order is worse than a 502. The caller
 * hears the error and decides; nothing tells the two cases apart.
 */
static void conn_fail(struct mh_client_conn *c, const char *err)
{
    struct mh_client_req *r = c->req;
    if (!r) {
        if (c->state == MH_CC_DRAINING)
            c->pool->stats.drains_abandoned++;
        mh_client_conn_close(c);
        return;
    }
    bool unsent = c->state == MH_CC_WRITING && c->out_off == 0;
    if (c->reused && !c->got_byte && (unsent || r->idempotent) && !r->_retried) {
        resend(c, r);
        return;
    }
    c->req = NULL;
    r->conn = NULL;
    mh_client_conn_close(c);
    r->err = err;
    if (r->head_done)
        r->body_done = true;
    /* Whatever the exchange waits for (head or body), the answer is this error. */
    if (r->_want)
        notify(r, (enum mh_client_event)(r->_want - 1));
}

/* ---- connecting ---------------------------------------------------------- */

static void start_exchange(struct mh_client_conn *c)
{
    struct mh_client_req *r = c->req;
    llhttp_init(&c->parser, HTTP_RESPONSE, parser_settings());
    c->parser.data = c;
    c->head.len = c->body.len = c->head_end = 0;
    c->out_off = 0;
    c->drained = 0;
    c->got_byte = c->msg_done = c->extra_bytes = c->head_overflow = c->interim = false;
    c->keep_alive = false;
    r->head_done = r->body_done = r->early = false;
    c->state = MH_CC_WRITING;
    arm_phase_timer(c, r->send_timeout);
    conn_write(c);
}

/* The dialer's error as the client names it (client_err.h); DNS's and TLS's as they are. */
static const char *dial_err(const struct mh_dial *d, const char *err)
{
    if (err == mh_dial_err_timeout) {
        if (d->phase == MH_DIAL_RESOLVING)
            return mh_client_err_timeout_dns;
        return d->phase == MH_DIAL_HANDSHAKE ? mh_client_err_timeout_tls
                                             : mh_client_err_connect_timeout;
    }
    if (err == mh_dial_err_socket)
        return mh_client_err_socket;
    if (err == mh_dial_err_connect)
        return d->sys_errno == ECONNREFUSED ? mh_client_err_refused
               : d->sys_errno == ETIMEDOUT  ? mh_client_err_connect_timeout
                                            : mh_client_err_connect_failed;
    if (err == mh_dial_err_nomem)
        return mh_client_err_nomem;
    return err;
}

static void on_dialed(struct mh_dial *d, const char *err)
{
    struct mh_client_conn *c =
        (struct mh_client_conn *)((char *)d - offsetof(struct mh_client_conn, dial));
    if (err) {
        conn_fail(c, dial_err(d, err));
        return;
    }
    if (d->resumed)
        c->pool->stats.tls_resumed++;
    c->fd = mh_dial_take(d, &c->tp);
    c->io_fd_set = false; /* a new socket, perhaps under an old number: libev must add it */
    start_exchange(c);
}

/* ---- writing ------------------------------------------------------------- */

/*
 * Input while the request is still being written: the server may answer
 * early (413, 401) and stop reading, as RFC 9112 §9.5 allows. Reads what is
 * there; once a final head is in, sending stops for good (the server's view
 * of the unsent rest is unknown, so the connection is not reused) and the
 * exchange goes on with that response: a caller waiting for a piece to be
 * written is told (mh_client_send's false), one waiting for the head gets
 * it. True when the exchange has moved on, or failed (conn_fail told it).
 */
static bool early_input(struct mh_client_conn *c)
{
    if (mh_client_conn_pump(c) < 0)
        return true;
    struct mh_client_req *r = c->req;
    if (!r->head_done)
        return false;
    r->early = true;
    r->_chunk = NULL;
    r->_awaiting = false;
    r->_sent_last = true;
    c->keep_alive = false;
    c->state = MH_CC_BODY;
    if (c->msg_done)
        mh_client_conn_set_timer(c, 0);
    else
        arm_phase_timer(c, r->read_timeout);
    update_read_interest(c);
    if (r->_want == MH_CLIENT_SEND + 1)
        notify(r, MH_CLIENT_SEND);
    else
        notify(r, MH_CLIENT_HEAD);
    return true;
}

/* The next bytes of the request to write (the head, then a streamed piece), or false if none. */
static bool next_out(struct mh_client_conn *c, const char **p, size_t *left, size_t **off)
{
    struct mh_client_req *r = c->req;
    if (c->out_off < r->len) {
        *p = r->data + c->out_off;
        *left = r->len - c->out_off;
        *off = &c->out_off;
        return true;
    }
    if (r->_chunk && r->_chunk_off == r->_chunk_len) {
        /* a piece is out: ask for the next one */
        r->_chunk = NULL;
        r->_sent_last = r->_chunk_last;
        notify(r, MH_CLIENT_SEND);
    }
    if (!r->_chunk)
        return false;
    *p = r->_chunk + r->_chunk_off;
    *left = r->_chunk_len - r->_chunk_off;
    *off = &r->_chunk_off;
    return true;
}

/*
 * Writes what the request has to write. A streamed body that has no piece
 * to write waits for the caller with no socket interest and no send clock
 * (the caller is the slow one; the total deadline still runs).
 */
static void conn_write(struct mh_client_conn *c)
{
    struct mh_client_req *r = c->req;
    const char *p;
    size_t left, *off;
    while (next_out(c, &p, &left, &off)) {
        ssize_t n = mh_transport_write(&c->tp, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            mh_client_conn_set_io(c, wait_event(&c->tp, false) | EV_READ);
            return;
        }
        /* The server may have answered, then closed: its answer is what the caller gets. */
        if (n <= 0 && !early_input(c))
            conn_fail(c, mh_client_err_reset_sending);
        if (n <= 0)
            return;
        *off += (size_t)n;
        if (r->send_timeout > 0)
            arm_phase_timer(c, r->send_timeout); /* a write: the clock between two restarts */
    }
    if (r->stream && !r->_sent_last) {
        r->_awaiting = true;
        mh_client_conn_set_io(c, EV_READ); /* an early answer */
        arm_phase_timer(c, 0);
        return;
    }
    c->state = MH_CC_HEAD;
    arm_phase_timer(c, r->read_timeout);
    mh_client_conn_set_io(c, EV_READ);
}

/* ---- events -------------------------------------------------------------- */

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    struct mh_client_conn *c = w->data;
    (void)loop;
    switch (c->state) {
    case MH_CC_WRITING:
        if ((revents & EV_READ) && early_input(c))
            break;
        if (!c->req->_awaiting)
            conn_write(c);
        break;
    case MH_CC_HEAD:
    case MH_CC_BODY:
        conn_on_input(c);
        break;
    case MH_CC_DRAINING:
        if (mh_client_conn_pump(c) >= 0)
            mh_client_drain_progress(c);
        break;
    case MH_CC_IDLE:
        /* Data or EOF on an idle connection: the server closed it, or broke the protocol. */
        if (!mh_client_conn_idle_input(c))
            mh_client_conn_close(c);
        break;
    default:
        mh_client_conn_set_io(c, 0);
    }
}

bool mh_client_conn_idle_input(struct mh_client_conn *c)
{
    char b;
    if (!c->tp.ops)
        return false;
    ssize_t n = mh_transport_read(&c->tp, &b, 1);
    return n < 0 && errno == EAGAIN && !(c->tp.wants & MH_TRANSPORT_READ_WANTS_WRITE);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct mh_client_conn *c = w->data;
    (void)revents;
    switch (c->state) {
    case MH_CC_WAIT_DRAIN:
        c->host->drain_waiter = NULL;
        conn_dial(c);
        break;
    case MH_CC_WRITING:
        c->reused = false; /* a slow server is not a stale connection: no retry */
        conn_fail(c, mh_client_err_timeout_send);
        break;
    case MH_CC_HEAD:
        c->reused = false;
        conn_fail(c, mh_client_err_timeout_response);
        break;
    case MH_CC_BODY:
        conn_fail(c, mh_client_err_timeout_body);
        break;
    case MH_CC_DRAINING:
        c->pool->stats.drains_abandoned++;
        mh_client_conn_close(c);
        break;
    case MH_CC_IDLE:
        mh_client_conn_close(c);
        break;
    default:
        break;
    }
}

/* ---- the exchange -------------------------------------------------------- */

/* What the pool, below this file, calls back for on a connection the exchange made. */
static const struct mh_client_conn_ops exchange_ops = {
    .begin = mh_client_conn_begin,
    .pump = mh_client_conn_pump,
    .close = mh_client_conn_close,
};

void mh_client_start(struct mh_client_req *r)
{
    struct mh_client_pool *p = r->pool;
    r->_want = MH_CLIENT_HEAD + 1;
    if (r->_deadline == 0 && r->timeout > 0)
        r->_deadline = ev_now(p->loop) + r->timeout;
    struct mh_client_host *h = mh_client_pool_host(p, r);
    if (!h) {
        r->err = mh_client_err_nomem;
        notify(r, MH_CLIENT_HEAD);
        return;
    }
    struct mh_client_conn *c = r->_retried ? NULL : mh_client_pool_take(p, h);
    if (c) {
        mh_client_conn_begin(c, r);
        return;
    }
    if (!(c = mh_client_conn_alloc(p, h, &exchange_ops))) {
        r->err = mh_client_err_nomem;
        notify(r, MH_CLIENT_HEAD);
        return;
    }
    ev_init(&c->io, on_io);
    ev_init(&c->timer, on_timer);
    c->io.data = c->timer.data = c;
    c->req = r;
    r->conn = c;
    c->reused = false;
    /*
     * A connection of this host is finishing a drain: it will most likely be
     * idle well before a new connection could be dialed (one round trip, or
     * three with TLS), so wait for it a little before dialing.
     */
    if (!r->_retried && p->s.drain_wait > 0 && h->ndraining > 0 && !h->drain_waiter) {
        c->state = MH_CC_WAIT_DRAIN;
        h->drain_waiter = c;
        mh_client_conn_set_timer(c, p->s.drain_wait);
        return;
    }
    conn_dial(c);
}

void mh_client_conn_begin(struct mh_client_conn *c, struct mh_client_req *r)
{
    c->pool->stats.reuses++;
    c->req = r;
    r->conn = c;
    c->reused = true;
    start_exchange(c);
}

static void conn_dial(struct mh_client_conn *c)
{
    struct mh_client_pool *p = c->pool;
    struct mh_client_req *r = c->req;
    p->stats.dials++;
    c->state = MH_CC_DIALING;
    struct mh_dial_tls tls = {.ca = p->s.tls_ca,
                              .cert = p->s.tls_cert,
                              .key = p->s.tls_key,
                              .verify = p->s.tls_verify,
                              .tls13_only = p->s.tls13_only,
                              .resume = p->s.tls_resume};
    struct mh_dial_key key = {.host = r->host, .port = r->port, .tls = r->tls ? &tls : NULL};
    c->dial.connect_timeout = r->connect_timeout > 0 ? r->connect_timeout : p->s.connect_timeout;
    c->dial.tls_timeout = p->s.tls_timeout;
    c->dial.deadline = r->_deadline;
    mh_dial_start(&c->dial, p->dialer, &key, on_dialed);
}

const char *mh_client_head(const struct mh_client_req *r, size_t *len)
{
    if (!r->conn) {
        *len = 0;
        return "";
    }
    *len = r->head_done ? r->conn->head_end : r->conn->head.len;
    return r->conn->head.data;
}

const char *mh_client_trailers(const struct mh_client_req *r, size_t *len)
{
    if (!r->conn || !r->head_done || !r->body_done || r->conn->head.len <= r->conn->head_end) {
        *len = 0;
        return "";
    }
    *len = r->conn->head.len - r->conn->head_end;
    return r->conn->head.data + r->conn->head_end;
}

const char *mh_client_body(const struct mh_client_req *r, size_t *len)
{
    if (!r->conn) {
        *len = 0;
        return "";
    }
    *len = r->conn->body.len;
    return r->conn->body.data;
}

void mh_client_body_consume(struct mh_client_req *r, size_t n)
{
    struct mh_client_conn *c = r->conn;
    if (!c)
        return;
    mh_buf_consume(&c->body, n);
    if (c->state == MH_CC_BODY)
        update_read_interest(c);
}

bool mh_client_send(struct mh_client_req *r, const char *data, size_t len, bool last)
{
    if (r->err || r->_sent_last || r->early)
        return false;
    r->_chunk = data;
    r->_chunk_len = len;
    r->_chunk_off = 0;
    r->_chunk_last = last;
    r->_want = 0; /* written at once: no event */
    struct mh_client_conn *c = r->conn;
    if (c && c->state == MH_CC_WRITING && r->_awaiting) {
        r->_awaiting = false;
        conn_write(c);
    }
    if (r->err || !r->_chunk)
        return false;
    r->_want = MH_CLIENT_SEND + 1;
    return true;
}

bool mh_client_head_want(struct mh_client_req *r)
{
    if (r->err || r->head_done)
        return false;
    r->_want = MH_CLIENT_HEAD + 1;
    return true;
}

bool mh_client_body_want(struct mh_client_req *r, bool all)
{
    struct mh_client_conn *c = r->conn;
    if (!c || r->err || c->msg_done || (!all && c->body.len > 0))
        return false;
    r->_want_all = all;
    /* Take what is there now, including records TLS has decrypted but not handed out. */
    if (mh_client_conn_pump(c) < 0 || !(c = r->conn))
        return false;
    if (c->msg_done || (!all && c->body.len > 0)) {
        if (c->msg_done)
            mh_client_conn_set_timer(c, 0);
        return false;
    }
    r->_want = MH_CLIENT_BODY + 1;
    update_read_interest(c);
    return true;
}

void mh_client_conn_close(struct mh_client_conn *c)
{
    struct mh_client_pool *p = c->pool;
    if (c->state == MH_CC_CLOSED)
        return;
    mh_dial_cancel(&c->dial);
    if (c->state == MH_CC_WAIT_DRAIN && c->host->drain_waiter == c)
        c->host->drain_waiter = NULL;
    if (c->state == MH_CC_DRAINING)
        c->host->ndraining--;
    if (c->state == MH_CC_IDLE)
        mh_idle_unlink(&p->idle, &c->idle);
    ev_io_stop(p->loop, &c->io);
    c->io_events = 0;
    ev_timer_stop(p->loop, &c->timer);
    if (c->tp.ops) { /* closes the socket (and frees a TLS session) */
        mh_transport_close(&c->tp);
        c->tp.ops = NULL;
        c->fd = -1;
    }
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    if (c->req) {
        c->req->conn = NULL;
        c->req = NULL;
    }
    c->state = MH_CC_CLOSED;
    /* off the open list, onto the free list */
    if (c->aprev)
        c->aprev->anext = c->anext;
    else
        p->open = c->anext;
    if (c->anext)
        c->anext->aprev = c->aprev;
    c->aprev = NULL;
    c->anext = p->free_conns;
    p->free_conns = c;
    p->nopen--;
}
