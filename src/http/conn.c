#include "conn_impl.h"

#include "h2_conn.h"
#include "http_parse.h"
#include "log.h"
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define LINGER_SECONDS 2.0
/* iovecs gathered per writev: enough for a pipelined burst of small responses. */
#define MAX_IOV 64
/*
 * Answers waiting on this many connections are written before the loop turn
 * ends, instead of at its prepare: with 10,000 busy connections one turn holds
 * hundreds of events, and the first answer would wait for the last request's
 * handler (bench/README.md, "early flush": -c10000 p99 below nginx's; at 16
 * the writes carried too few answers and CPU per request rose).
 */
#define EARLY_FLUSH 64
/* A request body left unread is discarded up to this much to keep the connection. */
#define DRAIN_MAX (256 * 1024)

static void conn_process(struct mh_conn *c);
static void next_request(struct mh_conn *c);
static void update_io(struct mh_conn *c);
static void end_request(struct mh_conn *c);
static const struct mh_req_ops http1_ops;

/* ---- lists and timers ---------------------------------------------------- */

static void list_remove(struct mh_conn_list *l, struct mh_conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    l->n--;
}

static void list_push(struct mh_conn_list *l, struct mh_conn *c)
{
    c->prev = NULL;
    c->next = l->head;
    if (l->head)
        l->head->prev = c;
    l->head = c;
    l->n++;
}

/* Idle connections are the first to go on graceful stop and reload. */
static void set_idle_list(struct mh_conn *c, bool idle)
{
    struct mh_http_ctx *w = c->h;
    if (c->on_idle_list == idle)
        return;
    list_remove(c->on_idle_list ? &w->idle : &w->active, c);
    list_push(idle ? &w->idle : &w->active, c);
    c->on_idle_list = idle;
}

/*
 * One timer per connection. Moving a deadline later only stores it; the
 * timer, when it fires early, re-arms for the rest ("be smart about
 * timeouts" in libev's manual), so per-request timer work is a store.
 */
static ev_tstamp earliest(ev_tstamp a, ev_tstamp b);

/* arm_timer's libev part: the timer is off or due later than `at`. */
static __attribute__((noinline)) void rearm_timer(struct mh_conn *c, ev_tstamp at)
{
    struct ev_loop *loop = c->h->loop;
    ev_tstamp in = at - ev_now(loop);
    ev_timer_stop(loop, &c->timer);
    ev_timer_set(&c->timer, in > 0 ? in : 0., 0.);
    ev_timer_start(loop, &c->timer);
    c->timer_at = at;
}

/* Inline, with its libev calls out of line: on the hot path it is two compares. */
static inline void arm_timer(struct mh_conn *c)
{
    ev_tstamp at = earliest(c->deadline, c->send_deadline);
    if (at != 0 && (!ev_is_active(&c->timer) || c->timer_at > at))
        rearm_timer(c, at);
}

static void set_deadline(struct mh_conn *c, ev_tstamp at)
{
    c->deadline = at;
    arm_timer(c);
}

void mh_conn_set_deadline(struct mh_conn *c, ev_tstamp at)
{
    set_deadline(c, at);
}

void mh_conn_set_idle(struct mh_conn *c, bool idle)
{
    set_idle_list(c, idle);
}

/* `seconds` from now as a deadline; 0 (off) stays 0. */
static ev_tstamp after(struct mh_conn *c, double seconds)
{
    return seconds > 0 ? ev_now(c->h->loop) + seconds : 0;
}

static ev_tstamp earliest(ev_tstamp a, ev_tstamp b)
{
    if (a == 0)
        return b;
    if (b == 0)
        return a;
    return a < b ? a : b;
}

static void set_timeout(struct mh_conn *c, double seconds)
{
    set_deadline(c, after(c, seconds));
}

/*
 * While a handler runs: the write deadline, and while body bytes are due the
 * read deadline and, when the handler waits for them, the body deadline.
 */
static ev_tstamp handler_due(const struct mh_conn *c)
{
    ev_tstamp at = c->write_deadline;
    if (c->req.body_state == MH_BODY_MORE) {
        at = earliest(at, c->read_deadline);
        if (c->body_wanted && !c->tunnel)
            at = earliest(at, c->body_deadline);
    }
    return at;
}

static void set_handler_deadline(struct mh_conn *c)
{
    set_deadline(c, handler_due(c));
}

/*
 * body_timeout is a no-progress timeout on a request body still owed
 * (Content-Length not complete, chunked not finished), as nginx's
 * client_body_timeout. Its clock runs only while the server is willing to
 * read: while the handler waits for body bytes (body_wanted), the only
 * time this connection reads. Before the handler asks, and while it works
 * on what it got, nothing is read (back-pressure: the client's bytes wait
 * in the socket), so the client cannot be late then. The clock starts
 * when the handler asks and again at every read that brought bytes: a
 * slow but steady upload is never cut; a client that stops sending is,
 * body_timeout after its last byte. A switched protocol's stream (tunnel)
 * has its own rules for silence and no body clock.
 */
static void note_body_progress(struct mh_conn *c)
{
    c->body_deadline = after(c, c->h->limits->body_timeout);
}

static struct mh_conn *conn_of(const struct mh_req *r)
{
    return (struct mh_conn *)r; /* req is the first field */
}

static void conn_set_read_timeout(struct mh_req *r, double seconds)
{
    struct mh_conn *c = conn_of(r);
    c->read_deadline = after(c, seconds);
    if (c->state == MH_CONN_HANDLER)
        set_handler_deadline(c);
}

static void conn_set_write_timeout(struct mh_req *r, double seconds)
{
    struct mh_conn *c = conn_of(r);
    c->write_deadline = after(c, seconds);
    if (c->state == MH_CONN_HANDLER)
        set_handler_deadline(c);
}

/* Calls a handler callback (when it has one) for the request in progress. */
static void notify(struct mh_conn *c, void (*fn)(struct mh_req *r))
{
    if (fn)
        fn(&c->req);
}

/*
 * Output is waiting for the client: it must take some of it within
 * send_timeout, counted again from each write that made progress (nginx's
 * send_timeout). A slow but steady reader is never cut, however long the
 * response; one that stops reading is.
 */
static void note_send_progress(struct mh_conn *c, bool progressed, bool blocked)
{
    double limit = c->h->limits->send_timeout;
    if (!blocked || limit <= 0) {
        c->send_deadline = 0;
        return;
    }
    if (progressed || c->send_deadline == 0) {
        c->send_deadline = after(c, limit);
        arm_timer(c);
    }
}

/*
 * No body bytes for body_timeout while the handler waited (see
 * note_body_progress). The handler hears "timeout". A response not begun
 * becomes 408 with Connection: close (finish_response), whatever the
 * handler makes of it; one already under way cannot say so, and the
 * connection closes now.
 */
static void body_stalled(struct mh_conn *c)
{
    struct mh_req *r = &c->req;
    bool under_way = r->res.head_sent;
    /* info, as nginx logs it: the client's doing, and one line per stalled request */
    mh_log(MH_LOG_INFO, "fd %d: body timeout: no request body bytes for %g s (%llu received); %s",
           c->fd, c->h->limits->body_timeout, (unsigned long long)r->body_received,
           under_way ? "response under way: closing" : "408");
    r->body_state = MH_BODY_STALLED;
    c->close_after = true;
    c->body_wanted = false;
    if (under_way) {
        mh_conn_close(c); /* on_abort: the waiting read resumes with "timeout" */
        return;
    }
    set_handler_deadline(c);
    if (c->in_handler)
        notify(c, c->req.handler->ops->on_body);
    update_io(c);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_conn *c = t->data;
    (void)revents;
    ev_tstamp due = earliest(c->deadline, c->send_deadline);
    if (due == 0 || c->closed)
        return;
    ev_tstamp now = ev_now(loop);
    if (now < due) {
        ev_timer_set(&c->timer, due - now, 0.);
        ev_timer_start(loop, &c->timer);
        c->timer_at = due;
        return;
    }
    if (c->send_deadline && now >= c->send_deadline) {
        mh_log(MH_LOG_WARN, "fd %d: send timeout: the client read nothing for %g s; closing", c->fd,
               c->h->limits->send_timeout);
        mh_conn_close(c);
        return;
    }
    switch (c->state) {
    case MH_CONN_H2:
        mh_h2_on_timer(c);
        return;
    case MH_CONN_HEAD:
        mh_log(MH_LOG_DEBUG, "fd %d: request head timed out", c->fd);
        break;
    case MH_CONN_HANDLER: {
        /* deadlines that moved later (body progress) are only stored: re-arm for them */
        ev_tstamp at = handler_due(c);
        if (at == 0 || now < at) {
            set_deadline(c, at);
            return;
        }
        bool write_due = c->write_deadline && now >= c->write_deadline;
        if (c->req.body_state == MH_BODY_MORE && c->read_deadline && now >= c->read_deadline &&
            !write_due) {
            /* The body is late: the handler hears "timeout" and may still answer. */
            c->req.body_state = MH_BODY_TIMEOUT;
            c->close_after = true;
            set_deadline(c, c->write_deadline);
            if (c->body_wanted && c->in_handler) {
                c->body_wanted = false;
                notify(c, c->req.handler->ops->on_body);
            }
            update_io(c);
            return;
        }
        if (!write_due) {
            body_stalled(c);
            return;
        }
        mh_log(MH_LOG_WARN, "fd %d: write timeout: response not done in time; closing", c->fd);
        break;
    }
    default:
        break;
    }
    mh_conn_close(c);
}

/* ---- io ------------------------------------------------------------------ */

static void update_io(struct mh_conn *c)
{
    if (c->closed)
        return;
    bool want_read;
    switch (c->state) {
    case MH_CONN_HANDLER:
        want_read = c->body_wanted;
        break;
    default:
        want_read = true;
    }
    /* A transport may need the other direction to make progress (TLS handshake). */
    int ev = 0;
    if (want_read && !c->req.peer_closed)
        ev |= c->tp.wants & MH_TRANSPORT_READ_WANTS_WRITE ? EV_WRITE : EV_READ;
    if (c->want_write)
        ev |= c->tp.wants & MH_TRANSPORT_WRITE_WANTS_READ ? EV_READ : EV_WRITE;
    struct ev_loop *loop = c->h->loop;
    /* Input the transport already holds produces no socket event. */
    if ((ev & EV_READ) && mh_transport_pending(&c->tp))
        ev_feed_event(loop, &c->io, EV_READ);
    if (ev == c->io_events)
        return;
    ev_io_stop(loop, &c->io);
    if (ev) {
        ev_io_set(&c->io, c->fd, ev);
        ev_io_start(loop, &c->io);
    }
    c->io_events = ev;
}

static inline void push_pending(struct mh_conn *c)
{
    struct mh_http_ctx *w = c->h;
    if (c->in_pending || c->closed)
        return;
    c->in_pending = true;
    w->_npending++;
    c->next_pending = w->_pending;
    w->_pending = c;
    c->refs++;
}

/* HTTP/2 asks even with an empty wire queue: its frames wait inside nghttp2 (mh_h2_pump). */
void mh_conn_schedule_write(struct mh_conn *c)
{
    push_pending(c);
}

static void schedule_write(struct mh_conn *c)
{
    if (!mh_outq_empty(&c->out))
        push_pending(c);
}

/*
 * One write attempt from the front of the wire queue: writev over memory
 * and referenced chunks, sendfile for a file range; a transport without
 * those (TLS) gets the bytes copied into a pooled buffer first. Returns
 * bytes written (consumed from the queue), or -1 with errno.
 */
static ssize_t write_some(struct mh_conn *c)
{
    const struct mh_transport_ops *ops = c->tp.ops;
    if (ops->writev) {
        struct iovec iov[MAX_IOV];
        size_t bytes;
        int n = mh_outq_iov(&c->out, iov, MAX_IOV, &bytes);
        if (n > 0) {
            ssize_t w = n == 1 ? ops->write(&c->tp, iov[0].iov_base, iov[0].iov_len)
                               : ops->writev(&c->tp, iov, n);
            if (w > 0)
                mh_outq_consume(&c->out, (uint64_t)w);
            return w;
        }
        int fd;
        off_t off;
        uint64_t flen;
        if (ops->sendfile && mh_outq_front_file(&c->out, &fd, &off, &flen)) {
            size_t chunk = flen > (1u << 30) ? (1u << 30) : (size_t)flen;
            ssize_t sent = ops->sendfile(&c->tp, fd, &off, chunk);
            if (sent == 0) { /* the file is shorter than the range promised */
                errno = EIO;
                return -1;
            }
            if (sent > 0)
                mh_outq_consume(&c->out, (uint64_t)sent);
            return sent;
        }
    }
    /* Copy, then write from the copy: after EAGAIN the next write repeats the same bytes. */
    struct mh_buf *b = &c->wbuf;
    if (c->wbuf_sent == b->len) {
        if (mh_buf_acquire(b, c->h->bufs) < 0)
            return -1;
        ssize_t n = mh_outq_read_front(&c->out, b->data, b->cap);
        if (n < 0)
            return -1;
        b->len = (size_t)n;
        c->wbuf_sent = 0;
    }
    ssize_t n = ops->write(&c->tp, b->data + c->wbuf_sent, b->len - c->wbuf_sent);
    if (n > 0) {
        c->wbuf_sent += (size_t)n;
        if (c->wbuf_sent == b->len)
            b->len = c->wbuf_sent = 0;
    }
    return n;
}

static bool out_pending(const struct mh_conn *c)
{
    return !mh_outq_empty(&c->out) || c->wbuf_sent < c->wbuf.len;
}

/*
 * A tunnel lives long and is mostly idle, so whenever its output drains it
 * gives back the wire queue's buffer and chunk array (the next send takes
 * them again), and once the 101 is out, the response's header memory kept
 * for a next request that will never come.
 */
static void trim_tunnel(struct mh_conn *c)
{
    mh_outq_release(&c->out, c->h->bufs);
    mh_outq_free(&c->out);
    if (c->req.res.head_sent)
        mh_response_trim(&c->req.res);
}

static void conn_flush(struct mh_conn *c)
{
    struct mh_http_ctx *w = c->h;
    bool progressed = false;
    while (!c->closed && out_pending(c)) {
        const char *p;
        size_t len;
        ssize_t n;
        if (c->tp.ops->writev && mh_outq_single(&c->out, &p, &len)) {
            n = c->tp.ops->write(&c->tp, p, len); /* the common case: one send */
            if (n > 0)
                mh_outq_consume(&c->out, (uint64_t)n);
        } else {
            n = write_some(c);
        }
        if (n > 0) {
            progressed = true;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->want_write = true;
            note_send_progress(c, progressed, true);
            update_io(c);
            return;
        }
        mh_log(MH_LOG_DEBUG, "fd %d: write: %s", c->fd, n < 0 ? strerror(errno) : "closed");
        mh_conn_close(c);
        return;
    }
    if (c->closed)
        return;
    c->want_write = false;
    note_send_progress(c, true, false);
    if (c->state == MH_CONN_LINGER) {
        /*
         * Half-close and read what the client still sends: closing with
         * unread input would make the kernel send a reset that can destroy
         * the response before the client reads it.
         */
        mh_transport_shutdown(&c->tp);
        if (c->req.peer_closed) {
            mh_conn_close(c);
            return;
        }
        set_timeout(c, LINGER_SECONDS);
    } else if (c->tunnel) {
        trim_tunnel(c);
    } else if (c->state == MH_CONN_IDLE) {
        mh_outq_release(&c->out, w->bufs);
        if (c->wbuf.data)
            mh_buf_release(&c->wbuf, w->bufs);
    }
    if (c->in_handler)
        notify(c, c->req.handler->ops->on_writable);
    update_io(c);
}

/*
 * HTTP/2's flush (on_io_h2, the pending list): frames are serialized as the
 * wire queue empties, so it stays bounded, and written as they come. Once
 * all is out, the pooled buffers go back: an idle session pins none.
 */
static void flush_h2(struct mh_conn *c)
{
    while (!c->closed && c->state == MH_CONN_H2) {
        if (!out_pending(c)) {
            mh_h2_pump(c);
            if (c->closed || c->state != MH_CONN_H2 || !out_pending(c))
                break;
        }
        conn_flush(c);
        if (c->want_write)
            return; /* the socket is full: EV_WRITE comes back here */
    }
    if (!c->closed && c->state == MH_CONN_H2 && !out_pending(c)) {
        mh_outq_release(&c->out, c->h->bufs);
        if (c->wbuf.data)
            mh_buf_release(&c->wbuf, c->h->bufs);
    }
}

static void flush_pending(struct mh_conn *c)
{
    if (c->state == MH_CONN_H2)
        flush_h2(c);
    else
        conn_flush(c);
}

/* ---- lifecycle ----------------------------------------------------------- */

static void on_io(struct ev_loop *loop, ev_io *io, int revents);
static void on_io_first(struct ev_loop *loop, ev_io *io, int revents);

void mh_http_ctx_init(struct mh_http_ctx *h, struct ev_loop *loop,
                      const struct mh_http_limits *limits, struct mh_buf_pool *bufs)
{
    memset(h, 0, sizeof *h);
    h->loop = loop;
    h->limits = limits;
    h->bufs = bufs;
    h->_date_sec = -1;
}

static void conn_free(struct mh_conn *c)
{
    mh_h2_free(c);
    mh_req_free(&c->req);
    mh_outq_free(&c->out);
    mh_buf_free(&c->wbuf);
    mh_buf_free(&c->in);
    free(c->tunnel_head);
    free(c);
}

void mh_http_ctx_destroy(struct mh_http_ctx *h)
{
    mh_http_close_all(h);
    while (h->_closed) {
        struct mh_conn *c = h->_closed;
        h->_closed = c->next_closed;
        conn_free(c);
    }
    while (h->_free) {
        struct mh_conn *c = h->_free;
        h->_free = c->next;
        conn_free(c);
    }
}

static void flush_pending_list(struct mh_http_ctx *h)
{
    while (h->_pending) {
        struct mh_conn *c = h->_pending;
        h->_pending = c->next_pending;
        h->_npending--;
        c->in_pending = false;
        if (!c->closed)
            flush_pending(c);
        c->refs--;
    }
}

void mh_http_prepare(struct mh_http_ctx *h)
{
    flush_pending_list(h);
    struct mh_conn **pp = &h->_closed;
    while (*pp) {
        struct mh_conn *c = *pp;
        if (c->refs == 1) { /* only the closed list's own */
            *pp = c->next_closed;
            mh_h2_free(c);
            struct mh_buf_pool *bufs = h->bufs;
            mh_buf_release(&c->in, bufs);
            mh_outq_clear(&c->out);
            mh_outq_release(&c->out, bufs);
            mh_buf_release(&c->wbuf, bufs);
            if (c->req.body.cap > MH_BUF_CHUNK)
                mh_buf_free(&c->req.body);
            free(c->tunnel_head);
            c->tunnel_head = NULL;
            c->next = h->_free;
            h->_free = c;
        } else {
            pp = &c->next_closed;
        }
    }
}

bool mh_http_drained(const struct mh_http_ctx *h)
{
    return h->nconns == 0 && !h->_closed;
}

static bool close_if_idle(struct mh_conn *c)
{
    if (c->state == MH_CONN_H2) {
        mh_h2_shutdown(c); /* GOAWAY: it closes once its streams are done */
        return false;
    }
    if (c->state != MH_CONN_IDLE || out_pending(c))
        return false;
    mh_conn_close(c);
    return true;
}

void mh_http_close_idle(struct mh_http_ctx *h)
{
    struct mh_conn *c = h->idle.head;
    while (c) {
        struct mh_conn *next = c->next;
        close_if_idle(c);
        c = next;
    }
}

void mh_http_close_all(struct mh_http_ctx *h)
{
    while (h->active.head)
        mh_conn_close(h->active.head);
    while (h->idle.head)
        mh_conn_close(h->idle.head);
}

void mh_http_each_request(struct mh_http_ctx *h, void (*fn)(struct mh_req *r, void *ud), void *ud)
{
    for (struct mh_conn *c = h->active.head; c; c = c->next) {
        if (c->in_handler && !c->closed)
            fn(&c->req, ud);
        else if (c->state == MH_CONN_H2 && !c->closed)
            mh_h2_each_request(c, fn, ud);
    }
}

/* Once a second: the Date line for `now`. */
static __attribute__((noinline)) void format_date(struct mh_http_ctx *h, time_t now)
{
    struct tm tm;
    gmtime_r(&now, &tm);
    h->_date_len =
        strftime(h->_date_line, sizeof h->_date_line, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    h->_date_sec = now;
}

const char *mh_http_date(struct mh_http_ctx *h, size_t *len)
{
    time_t now = (time_t)ev_now(h->loop);
    if (now != h->_date_sec)
        format_date(h, now);
    *len = h->_date_len;
    return h->_date_line;
}

struct mh_conn *mh_http_accept(struct mh_http_ctx *w, const struct mh_handler *root,
                               struct mh_tls_server *tls, int fd,
                               const struct sockaddr_storage *peer, socklen_t plen)
{
    struct mh_conn *c = w->_free;
    if (c) {
        w->_free = c->next;
    } else if (!(c = calloc(1, sizeof *c))) {
        return NULL;
    }
    /* keep the header array and buffers of a pooled object */
    struct mh_req req = c->req;
    struct mh_outq out = c->out;
    struct mh_buf wbuf = c->wbuf;
    memset(c, 0, sizeof *c);
    c->req = req;
    c->out = out;
    c->wbuf = wbuf;
    mh_req_reset(&c->req);
    c->req.ops = &http1_ops;
    c->h = w;
    c->root = root;
    c->fd = fd;
    c->state = MH_CONN_IDLE;
    if (tls) {
        if (mh_tls_accept(tls, &c->tp, fd) < 0) {
            c->next = w->_free;
            w->_free = c;
            return NULL;
        }
    } else {
        mh_transport_plain_init(&c->tp, fd);
    }
    memcpy(&c->peer, peer, plen);
    c->peer_len = plen;
    mh_http_parser_init(c);
    ev_io_init(&c->io, on_io_first, fd, 0);
    c->io.data = c;
    ev_init(&c->timer, on_timer);
    c->timer.data = c;
    w->nconns++;
    list_push(&w->idle, c);
    c->on_idle_list = true;
    /* A new connection gets the header timeout: it owes us a request. */
    set_timeout(c, w->limits->read_header_timeout);
    update_io(c);
    return c;
}

void mh_conn_close(struct mh_conn *c)
{
    if (c->closed)
        return;
    struct mh_http_ctx *w = c->h;
    c->closed = true;
    ev_io_stop(w->loop, &c->io);
    ev_timer_stop(w->loop, &c->timer);
    mh_transport_close(&c->tp);
    c->fd = -1;
    list_remove(c->on_idle_list ? &w->idle : &w->active, c);
    w->nconns--;
    c->next_closed = w->_closed;
    w->_closed = c;
    c->refs++;              /* the closed list's reference, dropped when it is freed */
    mh_outq_clear(&c->out); /* releases referenced strings and files now */
    if (c->h2)
        mh_h2_close(c);
    if (c->in_handler) {
        c->req.closed = true;
        notify(c, c->req.handler->ops->on_abort);
    }
    if (w->on_close)
        w->on_close(w->ud);
}

bool mh_conn_closed(const struct mh_conn *c)
{
    return c->closed;
}

static const char *conn_remote_addr(const struct mh_req *r, char *buf, size_t len)
{
    return mh_conn_peer_addr(conn_of(r), buf, len);
}

static const struct mh_transport *conn_transport(const struct mh_req *r)
{
    return mh_conn_transport(conn_of(r));
}

const struct mh_transport *mh_conn_transport(const struct mh_conn *c)
{
    return &c->tp;
}

const char *mh_conn_peer_addr(const struct mh_conn *c, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];
    int port = 0;
    if (c->peer.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&c->peer;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        port = ntohs(a->sin_port);
        snprintf(buf, len, "%s:%d", ip, port);
    } else if (c->peer.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&c->peer;
        if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
            inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], ip, sizeof ip);
        else
            inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        port = ntohs(a->sin6_port);
        snprintf(buf, len, strchr(ip, ':') ? "[%s]:%d" : "%s:%d", ip, port);
    } else {
        snprintf(buf, len, "-");
    }
    return buf;
}

/* ---- responses ----------------------------------------------------------- */

static void head_ctx(struct mh_conn *c, struct mh_head_ctx *ctx, bool complete)
{
    struct mh_http_ctx *w = c->h;
    ctx->date_line = mh_http_date(w, &ctx->date_len);
    ctx->http_minor = c->req.head.http_minor;
    ctx->head_method = c->req.head.method == HTTP_HEAD;
    bool keep = c->req.head.keep_alive && !c->req.res.close && !c->close_after &&
                !w->shutting_down && !c->req.peer_closed;
    long max = w->limits->keepalive_requests;
    if (max > 0 && c->requests >= (unsigned long)max)
        keep = false;
    /* An HTTP/1.0 body of unknown length ends when we close. */
    if (!complete && c->req.head.http_minor == 0 && !c->req.res.has_length)
        keep = false;
    ctx->keep_alive = keep;
    ctx->upgrade = false;
}

/* Output failed for lack of memory: nothing sensible can follow. */
static void out_of_memory(struct mh_conn *c)
{
    mh_log(MH_LOG_ERROR, "fd %d: out of memory building a response; closing", c->fd);
    mh_conn_close(c);
}

static void conn_abort(struct mh_req *r)
{
    mh_conn_close(conn_of(r));
}

static uint64_t conn_pending(const struct mh_req *r)
{
    const struct mh_conn *c = conn_of(r);
    return c->out.bytes + (c->wbuf.len - c->wbuf_sent);
}

static const char *conn_head(const struct mh_req *r)
{
    const struct mh_conn *c = conn_of(r);
    return c->tunnel_head ? c->tunnel_head : mh_conn_head(c);
}

/* The response streams from here: head and staged body to the wire. */
static void flush_response(struct mh_conn *c)
{
    if (c->closed)
        return;
    if (c->req.body_state == MH_BODY_BAD) {
        /* the answer is the server's 400 (finish_response): the handler's bytes are dropped */
        mh_outq_clear(&c->req.res.body);
        return;
    }
    if (mh_outq_acquire(&c->out, c->h->bufs) < 0)
        return out_of_memory(c);
    if (c->tunnel && c->req.res.head_sent) {
        if (mh_outq_move(&c->out, &c->req.res.body) < 0)
            return out_of_memory(c);
        return schedule_write(c);
    }
    if (mh_req_run_filters(&c->req, false) < 0)
        return mh_conn_close(c);
    struct mh_head_ctx ctx;
    head_ctx(c, &ctx, false);
    if (c->tunnel)
        ctx.upgrade = true; /* the 101: the connection is the tunnel's from here */
    if (!ctx.keep_alive)
        c->close_after = true;
    if (mh_response_emit(&c->req.res, &c->out, &ctx, false) < 0)
        return out_of_memory(c);
    schedule_write(c);
}

/*
 * Switches to closing once the output is written. What is still queued may
 * be a long download: send_timeout guards it (and write_timeout, when set),
 * not a fixed deadline; LINGER_SECONDS starts once it is out.
 */
static void start_linger(struct mh_conn *c);

void mh_conn_linger(struct mh_conn *c)
{
    ev_set_cb(&c->io, on_io); /* HTTP/2 is done: the lingering close reads as HTTP/1 does */
    c->close_after = true;
    start_linger(c);
}

static void start_linger(struct mh_conn *c)
{
    const struct mh_http_limits *lim = c->h->limits;
    c->state = MH_CONN_LINGER;
    set_idle_list(c, false);
    set_timeout(c, lim->write_timeout > 0 ? lim->write_timeout : lim->send_timeout > 0 ? 0 : 30);
    if (!out_pending(c))
        conn_flush(c); /* nothing queued: shut the write side now */
    else
        schedule_write(c);
    update_io(c);
}

/* The request is over for everyone above: observers, then the owner's on_end. */
static void end_request(struct mh_conn *c)
{
    struct mh_req *r = &c->req;
    if (c->h->observe && !c->closed)
        c->h->observe(c->h->ud, r);
    if (r->on_end)
        r->on_end(r);
    r->on_end = NULL;
    r->handler = NULL;
    c->in_handler = false;
    c->refs--; /* the handler's */
}

static void finish_response(struct mh_conn *c)
{
    if (!c->in_handler)
        return;
    if (c->closed) {
        mh_req_run_filters(&c->req, true); /* lets the filters free their state */
        mh_outq_clear(&c->req.res.body);   /* releases referenced strings and files now */
        end_request(c);
        return;
    }
    struct mh_response *res = &c->req.res;
    if (c->tunnel) {
        /* A switched stream has no end of its own: what is staged goes out, then it closes. */
        flush_response(c);
        if (c->closed) {
            end_request(c);
            return;
        }
        mh_outq_clear(&res->body);
        end_request(c);
        start_linger(c);
        return;
    }
    /*
     * The client's mistake decides the answer, whatever the handler made of
     * the `nil, err` it got: what it wrote is dropped (flush_response sent
     * none of a malformed body's).
     */
    enum mh_body_state bs = c->req.body_state;
    if ((bs == MH_BODY_TOO_LARGE || bs == MH_BODY_BAD || bs == MH_BODY_STALLED) &&
        !res->head_sent) {
        static const char large[] = "request body too large\n";
        static const char malformed[] = "400 Bad Request: malformed request body\n";
        static const char stalled[] = "408 Request Timeout: the request body stopped coming\n";
        const char *text = bs == MH_BODY_TOO_LARGE ? large
                           : bs == MH_BODY_BAD     ? malformed
                                                   : stalled;
        mh_response_reset(res);
        res->status = bs == MH_BODY_TOO_LARGE ? 413 : bs == MH_BODY_BAD ? 400 : 408;
        mh_outq_append(&res->body, text, strlen(text));
    }
    bool drainable = true;
    if (c->req.body_state == MH_BODY_MORE) {
        /* A client waiting for "100 Continue" may never send the body. */
        if (c->req.head.expect_continue && !c->continue_sent)
            drainable = false;
        else if (!(c->parser.flags & F_CHUNKED) &&
                 c->req.head.content_length - c->req.body_received > DRAIN_MAX)
            drainable = false;
    } else if (c->req.body_state != MH_BODY_NONE) {
        drainable = false;
    }
    if (!drainable)
        c->close_after = true;
    if (mh_req_run_filters(&c->req, true) < 0) {
        mh_conn_close(c);
        end_request(c);
        return;
    }
    struct mh_head_ctx ctx;
    head_ctx(c, &ctx, true);
    if (mh_outq_acquire(&c->out, c->h->bufs) < 0 ||
        mh_response_emit(res, &c->out, &ctx, true) < 0) {
        out_of_memory(c);
        end_request(c);
        return;
    }
    end_request(c);
    if (!ctx.keep_alive || c->close_after) {
        start_linger(c);
        return;
    }
    schedule_write(c);
    if (c->req.body_state == MH_BODY_MORE) {
        c->state = MH_CONN_DRAIN;
        c->draining = true;
        c->req.body.len = 0;
        set_timeout(c, c->h->limits->read_header_timeout);
    } else {
        next_request(c);
    }
    if (!c->processing)
        conn_process(c);
}

static void conn_send(struct mh_req *r, bool complete)
{
    struct mh_conn *c = conn_of(r);
    if (complete)
        finish_response(c);
    else
        flush_response(c);
}

/* A request that cannot be handled: answer `status` (if any) and close. */
static void fail(struct mh_conn *c, int status)
{
    if (status) {
        mh_log(MH_LOG_DEBUG, "fd %d: bad request: %d", c->fd, status);
        struct mh_head_ctx ctx;
        head_ctx(c, &ctx, true);
        ctx.keep_alive = false;
        ctx.http_minor = 1;
        ctx.head_method = false;
        char body[64];
        snprintf(body, sizeof body, "%d %s\n", status, mh_status_text(status));
        if (mh_outq_acquire(&c->out, c->h->bufs) < 0 ||
            mh_response_simple(&c->out, status, NULL, body, &ctx) < 0)
            return out_of_memory(c);
    }
    c->close_after = true;
    start_linger(c);
}

/* ---- requests ------------------------------------------------------------ */

/* The first bytes of a request head arrived: its header and read clocks start. */
static void begin_head(struct mh_conn *c)
{
    const struct mh_http_limits *lim = c->h->limits;
    c->state = MH_CONN_HEAD;
    set_idle_list(c, false);
    c->read_deadline = after(c, lim->read_timeout);
    set_deadline(c, earliest(after(c, lim->read_header_timeout), c->read_deadline));
}

static void next_request(struct mh_conn *c)
{
    struct mh_http_ctx *w = c->h;
    c->req_start = c->parse_pos;
    c->head_len = 0;
    bool peer_closed = c->req.peer_closed;
    mh_req_reset(&c->req);
    c->req.peer_closed = peer_closed;
    c->body_wanted = c->continue_sent = c->draining = false;
    c->last_was_value = c->url_done = false;
    if (c->parse_pos < c->in.len) {
        begin_head(c); /* pipelined bytes are waiting */
        return;
    }
    c->state = MH_CONN_IDLE;
    c->in.len = c->parse_pos = c->req_start = 0;
    mh_buf_release(&c->in, w->bufs);
    set_idle_list(c, true);
    set_timeout(c, w->limits->idle_timeout);
    if (w->shutting_down)
        close_if_idle(c);
}

static void start_request(struct mh_conn *c)
{
    struct mh_http_ctx *w = c->h;
    c->state = MH_CONN_HANDLER;
    c->requests++;
    c->req.started = ev_now(w->loop);
    c->req.max_body = (uint64_t)w->limits->max_body_bytes;
    c->write_deadline = after(c, w->limits->write_timeout);
    if (c->req.head.has_body) {
        c->req.body_state = MH_BODY_MORE;
    } else {
        /* llhttp completes a bodiless message on its next (empty) step: take it now. */
        int status;
        mh_http_parse(c, &status);
        c->req.body_state = MH_BODY_NONE;
    }
    set_handler_deadline(c);
    c->in_handler = true;
    c->refs++; /* the handler's, dropped in end_request */
    mh_req_start(&c->req, c->root);
}

/* Parses body bytes for a waiting handler; true once it can go on. */
static bool pump_body(struct mh_conn *c)
{
    struct mh_req *r = &c->req;
    if (c->tunnel) {
        if (r->body_state == MH_BODY_MORE && r->peer_closed)
            r->body_state = MH_BODY_CLOSED;
        return r->body_state != MH_BODY_MORE || r->body.len > c->tunnel_mark;
    }
    while (r->body_state == MH_BODY_MORE && (c->body_want_all || r->body.len == 0) &&
           c->parse_pos < c->in.len) {
        int status;
        switch (mh_http_parse(c, &status)) {
        case MH_PARSE_MESSAGE_DONE:
            r->body_state = MH_BODY_NONE;
            set_handler_deadline(c);
            break;
        case MH_PARSE_ERROR:
            /* 400: bad framing (the server answers it); else our own failure to keep the
             * bytes, which ends the connection */
            if (r->body_state != MH_BODY_TOO_LARGE)
                r->body_state = status == 400 ? MH_BODY_BAD : MH_BODY_CLOSED;
            break;
        default:
            break;
        }
    }
    if (r->body_state == MH_BODY_MORE && r->peer_closed)
        r->body_state = MH_BODY_CLOSED;
    return r->body_state != MH_BODY_MORE || (!c->body_want_all && r->body.len > 0);
}

static int conn_want_body(struct mh_req *r, bool all)
{
    struct mh_conn *c = conn_of(r);
    if (c->closed)
        return 1;
    if (!c->req.body_asked) {
        c->req.body_asked = true;
        /* Refused before a byte is read, and before "100 Continue" invites it. */
        if (r->body_state == MH_BODY_MORE && !(c->parser.flags & F_CHUNKED) &&
            r->head.content_length > c->req.max_body) {
            r->body_state = MH_BODY_TOO_LARGE;
            return 1;
        }
    }
    if (r->head.expect_continue && !c->continue_sent && r->body_state == MH_BODY_MORE &&
        r->body_received == 0 && !r->res.head_sent) {
        if (mh_outq_acquire(&c->out, c->h->bufs) == 0 &&
            mh_outq_append(&c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0)
            schedule_write(c);
        c->continue_sent = true;
    }
    c->body_want_all = all;
    c->tunnel_mark = r->body.len;
    if (pump_body(c))
        return 1;
    c->body_wanted = true;
    note_body_progress(c); /* the server reads from now: the client's clock starts */
    set_handler_deadline(c);
    update_io(c);
    return 0;
}

/*
 * Handles every complete request in the read buffer, in order. Handlers that
 * finish at once (the common case) let the loop go on to the next pipelined
 * request; their responses collect in the output and leave in one write.
 */
static void conn_process(struct mh_conn *c)
{
    const struct mh_http_limits *lim = c->h->limits;
    if (c->processing)
        return;
    c->processing = true;
    c->refs++;
    while (!c->closed && c->state != MH_CONN_LINGER) {
        if (c->state == MH_CONN_HANDLER) {
            if (c->body_wanted && pump_body(c)) {
                c->body_wanted = false;
                notify(c, c->req.handler->ops->on_body);
                continue;
            }
            break;
        }
        if (c->parse_pos == c->in.len)
            break;
        int status = 0;
        switch (mh_http_parse(c, &status)) {
        case MH_PARSE_NEED_MORE:
            if (c->state == MH_CONN_HEAD &&
                c->parse_pos - c->req_start > (size_t)lim->max_header_bytes)
                fail(c, c->url_done ? 431 : 414);
            goto out;
        case MH_PARSE_HEAD_DONE:
            set_idle_list(c, false);
            if (c->head_len > (size_t)lim->max_header_bytes) {
                fail(c, 431);
                goto out;
            }
            start_request(c);
            break;
        case MH_PARSE_MESSAGE_DONE:
            if (c->state == MH_CONN_DRAIN) {
                c->req.body_state = MH_BODY_NONE;
                next_request(c);
            }
            break;
        case MH_PARSE_ERROR:
            if (c->state == MH_CONN_DRAIN)
                mh_conn_close(c);
            else
                fail(c, status);
            goto out;
        }
    }
out:
    c->processing = false;
    update_io(c);
    c->refs--;
}

/*
 * Makes room in the read buffer. Bytes before the current request are
 * dropped; while a request is being answered its head must stay, but body
 * bytes already parsed (copied to c->body) can go.
 */
static bool make_room(struct mh_conn *c)
{
    if (c->in.cap - c->in.len >= 2048)
        return true;
    if (c->state == MH_CONN_HANDLER || c->state == MH_CONN_DRAIN) {
        size_t keep_to = c->req_start + c->head_len;
        if (c->parse_pos > keep_to) {
            memmove(c->in.data + keep_to, c->in.data + c->parse_pos, c->in.len - c->parse_pos);
            c->in.len -= c->parse_pos - keep_to;
            c->parse_pos = keep_to;
        }
    }
    if (c->req_start > 0) {
        memmove(c->in.data, c->in.data + c->req_start, c->in.len - c->req_start);
        c->in.len -= c->req_start;
        c->parse_pos -= c->req_start;
        c->req_start = 0;
    }
    if (c->in.cap - c->in.len >= 2048)
        return true;
    size_t limit = (size_t)c->h->limits->max_header_bytes + MH_BUF_CHUNK;
    if (c->in.cap < limit && mh_buf_reserve(&c->in, c->in.cap) == 0)
        return true;
    return c->in.cap > c->in.len;
}

/*
 * A connection without a read buffer (idle, or new) or one that is closing
 * reads into the stack first: an EOF or bytes to discard then cost no pooled
 * buffer, so a burst of idle connections closing at once does not pin (and
 * leave resident) one 16 KiB buffer each.
 */
#define STACK_READ 4096

void mh_conn_read_failed(struct mh_conn *c)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return;
    mh_log(MH_LOG_DEBUG, "fd %d: read: %s", c->fd, strerror(errno));
    mh_conn_close(c);
}

/*
 * HTTP/1 or HTTP/2, decided once from the first bytes: on TLS, ALPN alone
 * (RFC 9113 §3.2: h2 over TLS is negotiated; without ALPN, or with
 * http/1.1, the connection is HTTP/1.1 even if a connection preface comes);
 * on plain TCP, the connection preface when h2c is on (§3.3: prior
 * knowledge). 1: HTTP/2, 0: HTTP/1, -1: the bytes so far are a prefix of
 * the preface.
 */
static __attribute__((cold, noinline)) int detect_protocol(struct mh_conn *c)
{
    const struct mh_http_limits *lim = c->h->limits;
    if (mh_tls_active(&c->tp)) {
        const char *alpn = mh_tls_alpn(&c->tp);
        return alpn && lim->http2 && strcmp(alpn, "h2") == 0;
    }
    if (!lim->h2c)
        return 0;
    size_t n = c->in.len < MH_H2_PREFACE_LEN ? c->in.len : MH_H2_PREFACE_LEN;
    if (memcmp(c->in.data, MH_H2_PREFACE, n) != 0)
        return 0;
    return n < MH_H2_PREFACE_LEN ? -1 : 1;
}

static void on_io_h2(struct ev_loop *loop, ev_io *io, int revents);

static __attribute__((cold, noinline)) void start_h2(struct mh_conn *c)
{
    c->state = MH_CONN_H2;
    ev_set_cb(&c->io, on_io_h2);
    if (mh_h2_start(c, c->in.data, c->in.len) < 0)
        return out_of_memory(c);
    c->in.len = c->parse_pos = c->req_start = 0;
    mh_buf_release(&c->in, c->h->bufs);
}

/*
 * Reads and parses. `detect`: the connection's first bytes, where HTTP/1 or
 * HTTP/2 is decided (on_io_first); later reads skip that test (on_io).
 */
static inline __attribute__((always_inline)) void read_input(struct mh_conn *c, bool detect)
{
    struct mh_http_ctx *w = c->h;
    char small[STACK_READ];
    bool borrowed = !c->in.data || c->state == MH_CONN_LINGER;
    char *dst = small;
    size_t room = sizeof small;
    if (!borrowed) {
        if (!make_room(c)) {
            if (c->state == MH_CONN_HEAD || c->state == MH_CONN_IDLE)
                fail(c, c->url_done ? 431 : 414);
            return;
        }
        dst = c->in.data + c->in.len;
        room = c->in.cap - c->in.len;
    }
    ssize_t n = mh_transport_read(&c->tp, dst, room);
    if (n < 0)
        return mh_conn_read_failed(c);
    if (n == 0) {
        c->req.peer_closed = true;
        switch (c->state) {
        case MH_CONN_HANDLER:
            /* The handler finishes; a body it waits for will not come. */
            conn_process(c);
            break;
        case MH_CONN_LINGER:
            if (!out_pending(c))
                mh_conn_close(c);
            else
                update_io(c);
            break;
        default:
            mh_conn_close(c);
        }
        return;
    }
    if (c->state == MH_CONN_LINGER)
        return; /* discarded */
    if (c->body_wanted)
        note_body_progress(c); /* a store: on_timer re-arms for the later deadline */
    if (c->tunnel) {
        if (mh_buf_append(&c->req.body, small, (size_t)n) < 0)
            return out_of_memory(c);
        conn_process(c);
        return;
    }
    if (borrowed) {
        if (mh_buf_acquire(&c->in, w->bufs) < 0)
            return out_of_memory(c);
        memcpy(c->in.data, small, (size_t)n);
        c->in.len = (size_t)n;
    } else {
        c->in.len += (size_t)n;
    }
    if (detect) {
        int proto = detect_protocol(c);
        if (proto < 0)
            return;               /* a prefix of the preface: wait for the rest */
        ev_set_cb(&c->io, on_io); /* decided */
        if (proto > 0)
            return start_h2(c);
    }
    if (c->state == MH_CONN_IDLE)
        begin_head(c);
    conn_process(c);
}

static void conn_read(struct mh_conn *c)
{
    read_input(c, false);
}

static void conn_read_first(struct mh_conn *c)
{
    read_input(c, true);
}

/* A connection's socket events; `read` and `flush` are the protocol's (inlined: no indirect
 * calls). */
static inline __attribute__((always_inline)) void handle_io(struct mh_conn *c, int revents,
                                                            void (*read)(struct mh_conn *c),
                                                            void (*flush)(struct mh_conn *c))
{
    int read_ev = c->tp.wants & MH_TRANSPORT_READ_WANTS_WRITE ? EV_WRITE : EV_READ;
    int write_ev = c->tp.wants & MH_TRANSPORT_WRITE_WANTS_READ ? EV_READ : EV_WRITE;
    c->refs++;
    if (c->want_write && (revents & write_ev))
        flush(c);
    if (!c->closed && (revents & read_ev))
        read(c);
    c->refs--;
    if (c->h->_npending >= EARLY_FLUSH)
        flush_pending_list(c->h);
}

static void on_io(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    handle_io(io->data, revents, conn_read, conn_flush);
}

/* A new connection's watcher until its first bytes decide the protocol. */
static void on_io_first(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    handle_io(io->data, revents, conn_read_first, conn_flush);
}

/* An HTTP/2 connection's watcher (start_h2 switches to it, mh_conn_linger back). */
static void on_io_h2(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    handle_io(io->data, revents, mh_h2_read, flush_h2);
}

/*
 * Switching protocols: the head is copied out of the read buffer (a few
 * hundred bytes instead of a pooled 16 KiB buffer per idle tunnel), bytes
 * the client sent after the head become body, and from here conn_read
 * appends what it reads to r->body through the stack buffer.
 */
static int conn_upgrade(struct mh_req *r)
{
    struct mh_conn *c = conn_of(r);
    if (c->closed || c->tunnel || r->res.head_sent || r->head.has_body || r->head.http_minor == 0 ||
        c->state != MH_CONN_HANDLER)
        return -1;
    char *head = malloc(c->head_len ? c->head_len : 1);
    if (!head)
        return -1;
    const char *old = mh_conn_head(c);
    memcpy(head, old, c->head_len);
    r->body.len = 0;
    if (c->parse_pos < c->in.len &&
        mh_buf_append(&r->body, c->in.data + c->parse_pos, c->in.len - c->parse_pos) < 0) {
        free(head);
        return -1;
    }
    /*
     * Slices are offsets and follow the copy; the routed path is a pointer:
     * move it too. Memory kept for a next request on this connection (there
     * will be none) goes: a tunnel is long-lived and mostly idle.
     */
    struct mh_request *q = &r->head;
    if (q->route_path >= old && q->route_path < old + c->head_len)
        q->route_path = head + (q->route_path - old);
    if (q->route_path != q->cleaned.data)
        mh_buf_free(&q->cleaned);
    mh_request_shrink(q);
    c->tunnel_head = head;
    c->tunnel = true;
    c->close_after = true;
    c->req.body_asked = true;
    c->tunnel_mark = 0;
    r->body_state = MH_BODY_MORE;
    c->in.len = c->parse_pos = c->req_start = 0;
    mh_buf_release(&c->in, c->h->bufs);
    c->read_deadline = c->write_deadline = 0;
    set_handler_deadline(c);
    return 0;
}

static const struct mh_req_ops http1_ops = {
    .proto = "HTTP/1",
    .head = conn_head,
    .send = conn_send,
    .want_body = conn_want_body,
    .pending = conn_pending,
    .set_read_timeout = conn_set_read_timeout,
    .set_write_timeout = conn_set_write_timeout,
    .abort = conn_abort,
    .remote_addr = conn_remote_addr,
    .transport = conn_transport,
    .upgrade = conn_upgrade,
};
