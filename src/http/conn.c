#include "conn_impl.h"

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
 * handler (bench/notes/2026-12-02-lab-notebook.md, "early flush": -c10000 p99 below nginx's; at 16
 * the writes carried too few answers and CPU per request rose).
 */
#define EARLY_FLUSH 64
/*
 * A new connection's first read, and a lingering one's, go to the stack: an
 * EOF or bytes to discard then cost no pooled buffer, so a burst of
 * connections closing at once does not pin (and leave resident) one 16 KiB
 * buffer each.
 */
#define STACK_READ 4096

static void flush_pending_list(struct mh_http_ctx *h);
static void start_linger(struct mh_conn *c);

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

void mh_conn_set_idle(struct mh_conn *c, bool idle)
{
    struct mh_http_ctx *w = c->h;
    if (c->on_idle_list == idle)
        return;
    list_remove(c->on_idle_list ? &w->idle : &w->active, c);
    list_push(idle ? &w->idle : &w->active, c);
    c->on_idle_list = idle;
}

/* The timer is off or due later than `at` (out of line: the hot path is two compares). */
__attribute__((noinline)) void mh_conn_rearm_timer(struct mh_conn *c, ev_tstamp at)
{
    struct ev_loop *loop = c->h->loop;
    ev_tstamp in = at - ev_now(loop);
    ev_timer_stop(loop, &c->timer);
    ev_timer_set(&c->timer, in > 0 ? in : 0., 0.);
    ev_timer_start(loop, &c->timer);
    c->timer_at = at;
}

static void arm_timer(struct mh_conn *c)
{
    ev_tstamp at = mh_conn_earliest(c->deadline, c->send_deadline);
    if (at != 0 && (!ev_is_active(&c->timer) || c->timer_at > at))
        mh_conn_rearm_timer(c, at);
}

/*
 * Output is waiting for the client: it must take some of it within
 * send_timeout, counted again from each write that made progress (nginx's
 * send_timeout). A slow but steady reader is never cut, however long the
 * response; one that stops reading is.
 */
static inline void note_send_progress(struct mh_conn *c, bool progressed, bool blocked)
{
    double limit = c->h->limits->send_timeout;
    if (!blocked || limit <= 0) {
        c->send_deadline = 0;
        return;
    }
    if (progressed || c->send_deadline == 0) {
        c->send_deadline = mh_conn_after(c, limit);
        arm_timer(c);
    }
}

/* Deadlines that moved later were only stored: the timer re-arms for them here. */
static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_conn *c = t->data;
    (void)revents;
    ev_tstamp due = mh_conn_earliest(c->deadline, c->send_deadline);
    if (due == 0 || c->closed)
        return;
    ev_tstamp now = ev_now(loop);
    if (now < due) {
        mh_conn_rearm_timer(c, due);
        return;
    }
    if (c->send_deadline && now >= c->send_deadline) {
        mh_log(MH_LOG_WARN, "fd %d: send timeout: the client read nothing for %g s; closing", c->fd,
               c->h->limits->send_timeout);
        mh_conn_close(c);
        return;
    }
    /* Undetected (the first bytes' header timeout) or lingering: the end. */
    if (!c->proto || c->lingering) {
        mh_log(MH_LOG_DEBUG, "fd %d: %s timed out", c->fd, c->lingering ? "close" : "request head");
        mh_conn_close(c);
        return;
    }
    c->proto->timeout(c);
}

/* ---- io ------------------------------------------------------------------ */

/* The events c's state asks its watcher for. */
static inline int wanted_io(const struct mh_conn *c)
{
    /* A transport may need the other direction to make progress (TLS handshake). */
    int ev = 0;
    if (c->want_read && !c->peer_closed)
        ev |= c->tp.wants & MH_TRANSPORT_READ_WANTS_WRITE ? EV_WRITE : EV_READ;
    if (c->want_write)
        ev |= c->tp.wants & MH_TRANSPORT_WRITE_WANTS_READ ? EV_READ : EV_WRITE;
    return ev;
}

static void set_io(struct mh_conn *c, int ev)
{
    struct ev_loop *loop = c->h->loop;
    ev_io_stop(loop, &c->io);
    if (ev) {
        /*
         * Not ev_io_set: it tells libev the descriptor may be a new file, and
         * the next iteration re-registers it with epoll (EEXIST) even when the
         * mask is the one it had (bench/TFB.md). conn_begin's ev_io_init set the fd.
         */
        ev_io_modify(&c->io, ev);
        ev_io_start(loop, &c->io);
    }
    c->io_events = ev;
    c->io_lazy = false;
}

/*
 * Read interest dropped alone (a handler runs: HTTP/1 reads no further
 * request meanwhile) stays armed. Stopped now and started again when the
 * handler's wait (a Redis reply) ends in a later loop iteration, libev would
 * register the descriptor with epoll again: an epoll_ctl failing with EEXIST
 * per such request. If bytes come meanwhile (a pipelined request, EOF),
 * handle_io drops the interest then, and they wait in the kernel as before.
 */
void mh_conn_update_io(struct mh_conn *c)
{
    if (c->closed)
        return;
    int ev = wanted_io(c);
    /* Input the transport already holds produces no socket event. */
    if ((ev & EV_READ) && mh_transport_pending(&c->tp))
        ev_feed_event(c->h->loop, &c->io, EV_READ);
    c->io_lazy = ev == 0 && c->io_events == EV_READ;
    if (ev == c->io_events || c->io_lazy)
        return;
    set_io(c, ev);
}

void mh_conn_schedule_write(struct mh_conn *c)
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
                mh_outq_file_ran_dry(fd, off, flen);
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

bool mh_conn_out_pending(const struct mh_conn *c)
{
    return !mh_outq_empty(&c->out) || c->wbuf_sent < c->wbuf.len;
}

/* All output is out on a closing connection: half-close and wait for the client's EOF. */
static void lingered(struct mh_conn *c)
{
    /*
     * Closing with unread input would make the kernel send a reset that can
     * destroy the response before the client reads it: the write side is
     * shut, and what the client still sends is read and dropped.
     */
    mh_transport_shutdown(&c->tp);
    if (c->peer_closed) {
        mh_conn_close(c);
        return;
    }
    mh_conn_set_deadline(c, mh_conn_after(c, LINGER_SECONDS));
}

void mh_conn_flush(struct mh_conn *c)
{
    bool progressed = false;
    while (!c->closed && mh_conn_out_pending(c)) {
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
            mh_conn_update_io(c);
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
    if (c->lingering)
        lingered(c);
    else if (c->proto && c->proto->flushed)
        c->proto->flushed(c);
    mh_conn_update_io(c);
}

/* Output is due: the protocol writes it, or conn.c alone once the connection lingers. */
static inline void writable(struct mh_conn *c)
{
    if (c->proto && !c->lingering)
        c->proto->writable(c);
    else
        mh_conn_flush(c);
}

void mh_conn_read_failed(struct mh_conn *c)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return;
    mh_log(MH_LOG_DEBUG, "fd %d: read: %s", c->fd, strerror(errno));
    mh_conn_close(c);
}

/* A lingering connection's input: dropped until EOF, or past discard_body_bytes. */
static void linger_read(struct mh_conn *c)
{
    char small[STACK_READ];
    ssize_t n = mh_transport_read(&c->tp, small, sizeof small);
    if (n < 0)
        return mh_conn_read_failed(c);
    if (n > 0) {
        /* a client that goes on sending (an upload no one reads) is not read for long */
        if ((c->linger_left -= n) < 0) {
            mh_log(MH_LOG_DEBUG, "fd %d: closing: past discard_body_bytes", c->fd);
            mh_conn_close(c);
        }
        return;
    }
    c->peer_closed = true;
    if (!mh_conn_out_pending(c))
        mh_conn_close(c);
    else
        mh_conn_update_io(c);
}

/*
 * HTTP/1 or HTTP/2, decided once from the first bytes. With a transport
 * that negotiates (TLS), ALPN alone (RFC 9113 §3.2: h2 over TLS is
 * negotiated; without ALPN, or with http/1.1, the connection is HTTP/1.1
 * even if a connection preface comes); on plain TCP, the connection preface
 * when h2c is on (§3.3: prior knowledge). There, bytes that begin with the
 * method the preface reserves ("PRI ", never an HTTP/1 request) but are not
 * the preface are an invalid preface: HTTP/2 takes them, to refuse them
 * with GOAWAY PROTOCOL_ERROR (§3.4), not HTTP/1 with a 400 the client
 * cannot read. Bytes that do not begin "PRI " are HTTP/1 by design, even
 * when a client meant them as a preface (h2spec's "INVALID CONNECTION
 * PREFACE"): on a listener that serves both, the first line is all there
 * is to tell the two apart, and any other first line is an HTTP/1 request
 * line, which llhttp judges (an unknown method or a malformed line: 400
 * and the close, RFC 9112 §3). §3.4's GOAWAY is for a client known to
 * speak HTTP/2; this one is not. Returns the protocol, or NULL while the
 * bytes so far are a prefix of the preface.
 */
static const struct mh_conn_proto *detect(struct mh_conn *c, const char *bytes, size_t n)
{
    const struct mh_http_limits *lim = c->h->limits;
    const struct mh_conn_protos *p = c->h->_protos;
    const char *alpn = mh_transport_alpn(&c->tp);
    if (alpn)
        return lim->http2 && strcmp(alpn, "h2") == 0 ? p->http2 : p->http1;
    if (!lim->h2c)
        return p->http1;
    size_t k = n < MH_H2_PREFACE_LEN ? n : MH_H2_PREFACE_LEN;
    if (memcmp(bytes, MH_H2_PREFACE, k) != 0)
        return n >= 4 && memcmp(bytes, MH_H2_PREFACE, 4) == 0 ? p->http2 : p->http1;
    return k < MH_H2_PREFACE_LEN ? NULL : p->http2;
}

/* The protocol takes the connection; its state from the object's last use is kept if it is its. */
static void start_proto(struct mh_conn *c, const struct mh_conn_proto *p, const char *bytes,
                        size_t n)
{
    if (c->state_proto != p) {
        if (c->proto_state)
            c->state_proto->destroy(c->proto_state);
        c->proto_state = NULL;
        c->state_proto = p;
    }
    c->proto = p;
    if (p->start(c, bytes, n) < 0) {
        mh_log(MH_LOG_ERROR, "fd %d: out of memory starting %s; closing", c->fd, p->name);
        mh_conn_close(c);
    }
}

/*
 * A new connection's first bytes (a prefix of the preface kept in c->first
 * comes first): they decide the protocol, which gets them.
 */
static __attribute__((cold, noinline)) void first_read(struct mh_conn *c)
{
    char small[STACK_READ];
    memcpy(small, c->first, c->nfirst);
    ssize_t n = mh_transport_read(&c->tp, small + c->nfirst, sizeof small - c->nfirst);
    if (n < 0)
        return mh_conn_read_failed(c);
    if (n == 0) {
        c->peer_closed = true;
        mh_conn_close(c);
        return;
    }
    size_t len = c->nfirst + (size_t)n;
    const struct mh_conn_proto *p = detect(c, small, len);
    if (!p) { /* a prefix of the preface: wait for the rest */
        memcpy(c->first, small, len);
        c->nfirst = (unsigned char)len;
        return;
    }
    c->nfirst = 0;
    start_proto(c, p, small, len);
}

/*
 * A connection's socket events. Once the protocol is known, the watcher's
 * callback is on_io; it is on_io_other before (first_read) and while the
 * connection lingers (linger_read).
 */
static inline __attribute__((always_inline)) void handle_io(struct mh_conn *c, int revents,
                                                            void (*read)(struct mh_conn *c))
{
    int read_ev = c->tp.wants & MH_TRANSPORT_READ_WANTS_WRITE ? EV_WRITE : EV_READ;
    int write_ev = c->tp.wants & MH_TRANSPORT_WRITE_WANTS_READ ? EV_READ : EV_WRITE;
    if (c->io_lazy) { /* the read interest mh_conn_update_io kept armed */
        int want = wanted_io(c);
        if (revents & (EV_READ | EV_WRITE) & ~want) {
            revents &= want;
            set_io(c, want);
        }
    }
    c->refs++;
    if (c->want_write && (revents & write_ev))
        writable(c);
    if (!c->closed && (revents & read_ev))
        read(c);
    c->refs--;
    if (c->h->_npending >= EARLY_FLUSH)
        flush_pending_list(c->h);
}

static void proto_read(struct mh_conn *c)
{
    c->proto->read(c);
}

static void other_read(struct mh_conn *c)
{
    if (c->lingering)
        linger_read(c);
    else if (c->proto)
        c->proto->read(c); /* the protocol began in this event: its read from the next */
    else
        first_read(c);
}

static void on_io(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    handle_io(io->data, revents, proto_read);
}

static void on_io_other(struct ev_loop *loop, ev_io *io, int revents)
{
    struct mh_conn *c = io->data;
    (void)loop;
    handle_io(c, revents, other_read);
    if (!c->closed && c->proto && !c->lingering)
        ev_set_cb(&c->io, on_io); /* decided */
}

/*
 * Switches to closing once the output is written. What is still queued may
 * be a long download: send_timeout guards it (and write_timeout, when set),
 * not a fixed deadline; LINGER_SECONDS starts once it is out.
 */
static void start_linger(struct mh_conn *c)
{
    const struct mh_http_limits *lim = c->h->limits;
    c->lingering = true;
    c->linger_left = lim->discard_body_bytes;
    c->want_read = true;
    ev_set_cb(&c->io, on_io_other);
    mh_conn_set_idle(c, false);
    mh_conn_set_deadline(c, mh_conn_after(c, lim->write_timeout > 0  ? lim->write_timeout
                                             : lim->send_timeout > 0 ? 0
                                                                     : 30));
    if (!mh_conn_out_pending(c))
        mh_conn_flush(c); /* nothing queued: shut the write side now */
    else
        mh_conn_schedule_write(c);
    mh_conn_update_io(c);
}

void mh_conn_linger(struct mh_conn *c)
{
    if (!c->closed && !c->lingering)
        start_linger(c);
}

/* ---- lifecycle ----------------------------------------------------------- */

void mh_http_ctx_init(struct mh_http_ctx *h, struct ev_loop *loop,
                      const struct mh_http_limits *limits, struct mh_buf_pool *bufs,
                      const struct mh_conn_protos *protos)
{
    memset(h, 0, sizeof *h);
    h->loop = loop;
    h->limits = limits;
    h->bufs = bufs;
    h->_protos = protos;
    h->_date_sec = -1;
}

static void conn_free(struct mh_conn *c)
{
    if (c->proto_state)
        c->state_proto->destroy(c->proto_state);
    mh_outq_free(&c->out);
    mh_buf_free(&c->wbuf);
    free(c);
}

void mh_http_ctx_destroy(struct mh_http_ctx *h)
{
    mh_http_close_all(h);
    while (h->_closed) {
        struct mh_conn *c = h->_closed;
        h->_closed = c->next_closed;
        if (c->proto)
            c->proto->recycle(c);
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
            writable(c);
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
            if (c->proto)
                c->proto->recycle(c);
            struct mh_buf_pool *bufs = h->bufs;
            mh_outq_clear(&c->out);
            mh_outq_release(&c->out, bufs);
            mh_buf_release(&c->wbuf, bufs);
            c->next = h->_free;
            h->_free = c;
        } else {
            pp = &c->next_closed;
        }
    }
}

void mh_http_trim(struct mh_http_ctx *h, size_t keep)
{
    struct mh_conn **pp = &h->_free;
    for (size_t i = 0; *pp && i < keep; i++)
        pp = &(*pp)->next;
    while (*pp) {
        struct mh_conn *c = *pp;
        *pp = c->next;
        conn_free(c);
    }
}

bool mh_http_drained(const struct mh_http_ctx *h)
{
    return h->nconns == 0 && !h->_closed;
}

struct mh_http_counts mh_http_counts(const struct mh_http_ctx *h)
{
    return (struct mh_http_counts){.open = h->nconns, .idle = h->idle.n};
}

void mh_http_close_idle(struct mh_http_ctx *h)
{
    struct mh_conn *c = h->idle.head;
    while (c) {
        struct mh_conn *next = c->next;
        if (c->lingering)
            ;
        else if (c->proto)
            c->proto->stop(c);
        else if (!mh_conn_out_pending(c))
            mh_conn_close(c); /* nothing read yet */
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
    for (struct mh_conn *c = h->active.head; c; c = c->next)
        if (c->proto && !c->closed)
            c->proto->each_request(c, fn, ud);
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

/* A connection object from the pool (its buffers and protocol state kept), or a new one. */
static struct mh_conn *conn_take(struct mh_http_ctx *w)
{
    struct mh_conn *c = w->_free;
    if (c) {
        w->_free = c->next;
    } else if (!(c = calloc(1, sizeof *c))) {
        return NULL;
    }
    struct mh_outq out = c->out;
    struct mh_buf wbuf = c->wbuf;
    void *state = c->proto_state;
    const struct mh_conn_proto *state_proto = c->state_proto;
    memset(c, 0, sizeof *c);
    c->out = out;
    c->wbuf = wbuf;
    c->proto_state = state;
    c->state_proto = state_proto;
    c->h = w;
    return c;
}

/* c->tp is set: the connection waits for its first bytes. */
static struct mh_conn *conn_begin(struct mh_conn *c, const struct mh_handler *root,
                                  const struct sockaddr_storage *peer, socklen_t plen)
{
    struct mh_http_ctx *w = c->h;
    c->root = root;
    c->fd = c->tp.fd;
    memcpy(&c->peer, peer, plen);
    c->peer_len = plen;
    c->peer_text[0] = '\0';
    c->want_read = true;
    ev_io_init(&c->io, on_io_other, c->fd, 0);
    c->io.data = c;
    ev_init(&c->timer, on_timer);
    c->timer.data = c;
    w->nconns++;
    list_push(&w->idle, c);
    c->on_idle_list = true;
    /* A new connection gets the header timeout: it owes us a request. */
    mh_conn_set_deadline(c, mh_conn_after(c, w->limits->read_header_timeout));
    mh_conn_update_io(c);
    return c;
}

struct mh_conn *mh_http_accept(struct mh_http_ctx *w, const struct mh_handler *root,
                               struct mh_tls_server *tls, int fd,
                               const struct sockaddr_storage *peer, socklen_t plen)
{
    struct mh_conn *c = conn_take(w);
    if (!c)
        return NULL;
    if (tls) {
        if (mh_tls_accept(tls, &c->tp, fd) < 0) {
            c->next = w->_free;
            w->_free = c;
            return NULL;
        }
    } else {
        mh_transport_plain_init(&c->tp, fd);
    }
    return conn_begin(c, root, peer, plen);
}

struct mh_conn *mh_http_accept_transport(struct mh_http_ctx *w, const struct mh_handler *root,
                                         const struct mh_transport *tp,
                                         const struct sockaddr_storage *peer, socklen_t plen)
{
    struct mh_conn *c = conn_take(w);
    if (!c)
        return NULL;
    c->tp = *tp;
    return conn_begin(c, root, peer, plen);
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
    if (c->proto)
        c->proto->close(c);
    if (w->on_close)
        w->on_close(w->ud);
}

bool mh_conn_closed(const struct mh_conn *c)
{
    return c->closed;
}

/* The connection's byte stream (plain TCP or TLS): req:tls() asks it about TLS. */
const struct mh_transport *mh_conn_transport(const struct mh_conn *c)
{
    return &c->tp;
}

/* Every proxied request asks (X-Forwarded-For): inet_ntop and snprintf once per connection. */
const char *mh_conn_peer_addr(struct mh_conn *c, char *buf, size_t len)
{
    if (c->peer_text[0] && len > 0) {
        size_t n = strnlen(c->peer_text, len - 1);
        memcpy(buf, c->peer_text, n);
        buf[n] = '\0';
        return buf;
    }
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
    size_t n = strnlen(buf, sizeof c->peer_text - 1);
    memcpy(c->peer_text, buf, n);
    c->peer_text[n] = '\0';
    return buf;
}
