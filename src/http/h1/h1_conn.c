/*
 * An HTTP/1.x connection (h1.h): its states, reading and parsing requests,
 * the request ops of struct mh_req for them, and the end of each request.
 */
#include "h1.h"

#include "h1_impl.h"
#include "h1_response.h"
#include "http_parse.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * An idle connection (no read buffer) or a tunnel reads into the stack
 * first: an EOF then costs no pooled buffer, so a burst of idle
 * connections closing at once does not pin (and leave resident) one
 * 16 KiB buffer each.
 */
#define STACK_READ 4096

static void process_input(struct mh_h1 *c);
static void next_request(struct mh_h1 *c);
static void update_io(struct mh_h1 *c);
static void end_request(struct mh_h1 *c);
static const struct mh_req_ops h1_req_ops;

/* ---- timers -------------------------------------------------------------- */

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
static bool body_clock_runs(const struct mh_h1 *c)
{
    return c->body_wanted && !c->tunnel;
}

static void note_body_progress(struct mh_h1 *c)
{
    c->clock.body = mh_conn_after(c->conn, c->conn->h->limits->body_timeout);
}

/* While a handler runs, the connection's deadline is the request's (mh_policy_due). */
static void set_handler_deadline(struct mh_h1 *c)
{
    mh_conn_set_deadline(c->conn, mh_policy_due(&c->req, &c->clock, body_clock_runs(c)));
}

static struct mh_h1 *h1_of(const struct mh_req *r)
{
    return (struct mh_h1 *)r; /* req is the first field */
}

static void h1_set_read_timeout(struct mh_req *r, double seconds)
{
    struct mh_h1 *c = h1_of(r);
    c->clock.read = mh_conn_after(c->conn, seconds);
    if (c->state == MH_H1_HANDLER)
        set_handler_deadline(c);
}

static void h1_set_write_timeout(struct mh_req *r, double seconds)
{
    struct mh_h1 *c = h1_of(r);
    c->clock.write = mh_conn_after(c->conn, seconds);
    if (c->state == MH_H1_HANDLER)
        set_handler_deadline(c);
}

/* Calls a handler callback (when it has one) for the request in progress. */
static void notify(struct mh_h1 *c, void (*fn)(struct mh_req *r))
{
    if (fn)
        fn(&c->req);
}

/* A handler waiting for the body hears that it ended (here: in error). */
static void wake_body(struct mh_h1 *c)
{
    if (c->body_wanted && c->in_handler) {
        c->body_wanted = false;
        notify(c, c->req.handler->ops->on_body);
    }
}

/*
 * The handler's deadlines (req_policy.h decides which passed). A late body
 * ends the connection after the answer, as its rest will not be read; a
 * stalled body's answer is the 408 (h1_send), or, with the response under
 * way, the connection closes now (on_abort: the waiting read resumes with
 * "timeout"); a late response closes it.
 */
static void handler_timeout(struct mh_h1 *c, ev_tstamp now)
{
    switch (mh_policy_late(&c->req, &c->clock, body_clock_runs(c), now)) {
    case MH_LATE_NONE:
        /* deadlines that moved later (body progress) are only stored: re-arm for them */
        set_handler_deadline(c);
        return;
    case MH_LATE_BODY:
        mh_policy_body_late(&c->req, &c->clock);
        c->close_after = true;
        set_handler_deadline(c);
        wake_body(c);
        update_io(c);
        return;
    case MH_LATE_BODY_STALLED:
        c->close_after = true;
        if (!mh_policy_body_stalled(&c->req, &c->clock, c->conn, 0, c->body_wanted)) {
            c->body_wanted = false;
            mh_conn_close(c->conn);
            return;
        }
        set_handler_deadline(c);
        wake_body(c);
        update_io(c);
        return;
    case MH_LATE_RESPONSE:
        mh_log(MH_LOG_WARN, "fd %d: write timeout: response not done in time; closing",
               c->conn->fd);
        mh_conn_close(c->conn);
        return;
    }
}

static void h1_timeout(struct mh_conn *conn)
{
    struct mh_h1 *c = conn->proto_state;
    switch (c->state) {
    case MH_H1_HEAD:
        mh_log(MH_LOG_DEBUG, "fd %d: request head timed out", conn->fd);
        break;
    case MH_H1_HANDLER:
        handler_timeout(c, ev_now(conn->h->loop));
        return;
    default:
        break;
    }
    mh_conn_close(conn);
}

/* ---- io ------------------------------------------------------------------ */

/* Input is read in every state but a handler's that waits for no body (back-pressure). */
static void update_io(struct mh_h1 *c)
{
    struct mh_conn *conn = c->conn;
    conn->want_read = conn->lingering || c->state != MH_H1_HANDLER || c->body_wanted;
    mh_conn_update_io(conn);
}

static void schedule_write(struct mh_h1 *c)
{
    if (!mh_outq_empty(&c->conn->out))
        mh_conn_schedule_write(c->conn);
}

/*
 * A tunnel lives long and is mostly idle, so whenever its output drains it
 * gives back the wire queue's buffer and chunk array (the next send takes
 * them again), and once the 101 is out, the response's header memory kept
 * for a next request that will never come.
 */
static void trim_tunnel(struct mh_h1 *c)
{
    mh_outq_release(&c->conn->out, c->conn->h->bufs);
    mh_outq_free(&c->conn->out);
    if (c->req.res.head_sent)
        mh_response_trim(&c->req.res);
}

/* Everything queued is out: an idle connection gives its buffers back, a handler may write more. */
static void h1_flushed(struct mh_conn *conn)
{
    struct mh_h1 *c = conn->proto_state;
    if (c->tunnel) {
        trim_tunnel(c);
    } else if (c->state == MH_H1_IDLE) {
        mh_outq_release(&conn->out, conn->h->bufs);
        if (conn->wbuf.data)
            mh_buf_release(&conn->wbuf, conn->h->bufs);
    }
    if (c->in_handler)
        notify(c, c->req.handler->ops->on_writable);
    c->conn->want_read = c->state != MH_H1_HANDLER || c->body_wanted;
}

/* ---- lifecycle ----------------------------------------------------------- */

static bool close_if_idle(struct mh_h1 *c)
{
    if (c->state != MH_H1_IDLE || mh_conn_out_pending(c->conn))
        return false;
    mh_conn_close(c->conn);
    return true;
}

static void h1_stop(struct mh_conn *conn)
{
    close_if_idle(conn->proto_state);
}

static const char *h1_remote_addr(const struct mh_req *r, char *buf, size_t len)
{
    return mh_conn_peer_addr(h1_of(r)->conn, buf, len);
}

static const struct mh_transport *h1_transport(const struct mh_req *r)
{
    return mh_conn_transport(h1_of(r)->conn);
}

/* ---- responses ----------------------------------------------------------- */

static void head_ctx(struct mh_h1 *c, struct mh_h1_head_ctx *ctx, bool complete)
{
    struct mh_http_ctx *w = c->conn->h;
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
static void out_of_memory(struct mh_h1 *c)
{
    mh_log(MH_LOG_ERROR, "fd %d: out of memory building a response; closing", c->conn->fd);
    mh_conn_close(c->conn);
}

static void h1_abort(struct mh_req *r)
{
    mh_conn_close(h1_of(r)->conn);
}

static uint64_t h1_pending(const struct mh_req *r)
{
    const struct mh_h1 *c = h1_of(r);
    return c->conn->out.bytes + (c->conn->wbuf.len - c->conn->wbuf_sent);
}

static const char *h1_head(const struct mh_req *r)
{
    const struct mh_h1 *c = h1_of(r);
    return c->tunnel_head ? c->tunnel_head : mh_h1_head(c);
}

/* The response streams from here: head and staged body to the wire. */
static void flush_response(struct mh_h1 *c)
{
    if (c->conn->closed)
        return;
    if (c->req.body_state == MH_BODY_BAD) {
        /* the answer is the server's 400 (finish_response): the handler's bytes are dropped */
        mh_outq_clear(&c->req.res.body);
        return;
    }
    if (mh_outq_acquire(&c->conn->out, c->conn->h->bufs) < 0)
        return out_of_memory(c);
    if (c->tunnel && c->req.res.head_sent) {
        if (mh_outq_move(&c->conn->out, &c->req.res.body) < 0)
            return out_of_memory(c);
        return schedule_write(c);
    }
    if (mh_req_run_filters(&c->req, false) < 0)
        return mh_conn_close(c->conn);
    struct mh_h1_head_ctx ctx;
    head_ctx(c, &ctx, false);
    if (c->tunnel)
        ctx.upgrade = true; /* the 101: the connection is the tunnel's from here */
    if (!ctx.keep_alive)
        c->close_after = true;
    if (mh_h1_response_emit(&c->req.res, &c->conn->out, &ctx, false) < 0)
        return out_of_memory(c);
    schedule_write(c);
}

/* The request is over for everyone above (mh_policy_end). */
static void end_request(struct mh_h1 *c)
{
    mh_policy_end(&c->req, c->conn);
    c->in_handler = false;
}

/*
 * The handler answered without reading all of the body: whether the
 * connection can be kept by reading and dropping the rest (at most
 * discard_body_bytes), decided before the head goes out, so that the answer
 * says Connection: close whenever the server will close. What has already
 * arrived is parsed now: a body that ends there costs nothing more. A
 * declared length whose rest is within the bound is read after the answer.
 * A chunked body whose end has not come is not waited for: its size is
 * unknown, and a client may send gigabytes (its lingering close reads at
 * most discard_body_bytes, conn.c). A client waiting for "100 Continue" may
 * never send the body.
 */
static bool drainable(struct mh_h1 *c)
{
    struct mh_req *r = &c->req;
    long bound = c->conn->h->limits->discard_body_bytes;
    if (r->body_state == MH_BODY_NONE)
        return true;
    if (r->body_state != MH_BODY_MORE || (r->head.expect_continue && !c->continue_sent))
        return false;
    uint64_t start = r->body_received;
    c->draining = true;
    while (c->parse_pos < c->in.len && r->body_received - start <= (uint64_t)bound) {
        int status;
        enum mh_parse_result pr = mh_http_parse(c, &status);
        if (pr == MH_PARSE_MESSAGE_DONE) {
            r->body_state = MH_BODY_NONE;
            return true;
        }
        if (pr == MH_PARSE_ERROR)
            return false;
    }
    if (c->parser.flags & F_CHUNKED)
        return false;
    return r->head.content_length - start <= (uint64_t)bound;
}

static void finish_response(struct mh_h1 *c)
{
    if (!c->in_handler)
        return;
    if (c->conn->closed) {
        mh_policy_drop_response(&c->req);
        end_request(c);
        return;
    }
    struct mh_response *res = &c->req.res;
    if (c->tunnel) {
        /* A switched stream has no end of its own: what is staged goes out, then it closes. */
        flush_response(c);
        if (c->conn->closed) {
            end_request(c);
            return;
        }
        mh_outq_clear(&res->body);
        end_request(c);
        mh_conn_linger(c->conn); /* closes once the output is written */
        return;
    }
    mh_policy_answer(&c->req); /* flush_response sent none of a malformed body's */
    if (!drainable(c))
        c->close_after = true;
    if (mh_req_run_filters(&c->req, true) < 0) {
        mh_conn_close(c->conn);
        end_request(c);
        return;
    }
    struct mh_h1_head_ctx ctx;
    head_ctx(c, &ctx, true);
    if (mh_outq_acquire(&c->conn->out, c->conn->h->bufs) < 0 ||
        mh_h1_response_emit(res, &c->conn->out, &ctx, true) < 0) {
        out_of_memory(c);
        end_request(c);
        return;
    }
    end_request(c);
    if (!ctx.keep_alive || c->close_after) {
        mh_conn_linger(c->conn);
        return;
    }
    schedule_write(c);
    if (c->req.body_state == MH_BODY_MORE) {
        c->state = MH_H1_DRAIN;
        c->draining = true;
        c->req.body.len = 0;
        mh_conn_set_deadline(c->conn,
                             mh_conn_after(c->conn, c->conn->h->limits->read_header_timeout));
    } else {
        next_request(c);
    }
    if (!c->processing)
        process_input(c);
}

static void h1_send(struct mh_req *r, bool complete)
{
    struct mh_h1 *c = h1_of(r);
    if (complete)
        finish_response(c);
    else
        flush_response(c);
}

/* A request that cannot be handled: answer `status` (if any) and close. */
static void fail(struct mh_h1 *c, int status)
{
    if (status) {
        mh_log(MH_LOG_DEBUG, "fd %d: bad request: %d", c->conn->fd, status);
        struct mh_h1_head_ctx ctx;
        head_ctx(c, &ctx, true);
        ctx.keep_alive = false;
        ctx.http_minor = 1;
        ctx.head_method = false;
        char body[64];
        if (mh_outq_acquire(&c->conn->out, c->conn->h->bufs) < 0 ||
            mh_h1_response_simple(&c->conn->out, status, NULL,
                                  mh_policy_status_body(status, body, sizeof body), &ctx) < 0)
            return out_of_memory(c);
    }
    c->close_after = true;
    mh_conn_linger(c->conn);
}

/* ---- requests ------------------------------------------------------------ */

/* The first bytes of a request head arrived: its header and read clocks start. */
static void begin_head(struct mh_h1 *c)
{
    const struct mh_http_limits *lim = c->conn->h->limits;
    c->state = MH_H1_HEAD;
    mh_conn_set_idle(c->conn, false);
    c->clock.read = mh_conn_after(c->conn, lim->read_timeout);
    mh_conn_set_deadline(
        c->conn, mh_conn_earliest(mh_conn_after(c->conn, lim->read_header_timeout), c->clock.read));
}

static void next_request(struct mh_h1 *c)
{
    struct mh_http_ctx *w = c->conn->h;
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
    c->state = MH_H1_IDLE;
    c->in.len = c->parse_pos = c->req_start = 0;
    mh_buf_release(&c->in, w->bufs);
    mh_conn_set_idle(c->conn, true);
    mh_conn_set_deadline(c->conn, mh_conn_after(c->conn, w->limits->idle_timeout));
    if (w->shutting_down)
        close_if_idle(c);
}

static void start_request(struct mh_h1 *c)
{
    struct mh_http_ctx *w = c->conn->h;
    c->state = MH_H1_HANDLER;
    c->requests++;
    mh_policy_start(&c->req, &c->clock, c->conn);
    c->req.max_body = (uint64_t)w->limits->max_body_bytes;
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
    mh_req_start(&c->req, c->conn->root);
}

/* Parses body bytes for a waiting handler; true once it can go on. */
static bool pump_body(struct mh_h1 *c)
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

static int h1_want_body(struct mh_req *r, bool all)
{
    struct mh_h1 *c = h1_of(r);
    if (c->conn->closed)
        return 1;
    if (mh_policy_first_ask(r, !(c->parser.flags & F_CHUNKED)))
        return 1;
    if (r->head.expect_continue && !c->continue_sent && r->body_state == MH_BODY_MORE &&
        r->body_received == 0 && !r->res.head_sent) {
        if (mh_outq_acquire(&c->conn->out, c->conn->h->bufs) == 0 &&
            mh_outq_append(&c->conn->out, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0)
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
static void process_input(struct mh_h1 *c)
{
    const struct mh_http_limits *lim = c->conn->h->limits;
    if (c->processing)
        return;
    c->processing = true;
    c->conn->refs++;
    while (!c->conn->closed && !c->conn->lingering) {
        if (c->state == MH_H1_HANDLER) {
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
            if (c->state == MH_H1_HEAD &&
                c->parse_pos - c->req_start > (size_t)lim->max_header_bytes)
                fail(c, c->url_done ? 431 : 414);
            goto out;
        case MH_PARSE_HEAD_DONE:
            mh_conn_set_idle(c->conn, false);
            if (c->head_len > (size_t)lim->max_header_bytes) {
                fail(c, 431);
                goto out;
            }
            start_request(c);
            break;
        case MH_PARSE_MESSAGE_DONE:
            if (c->state == MH_H1_DRAIN) {
                c->req.body_state = MH_BODY_NONE;
                next_request(c);
            }
            break;
        case MH_PARSE_ERROR:
            if (c->state == MH_H1_DRAIN)
                mh_conn_close(c->conn);
            else
                fail(c, status);
            goto out;
        }
    }
out:
    c->processing = false;
    update_io(c);
    c->conn->refs--;
}

/*
 * Makes room in the read buffer. Bytes before the current request are
 * dropped; while a request is being answered its head must stay, but body
 * bytes already parsed (copied to c->body) can go.
 */
static bool make_room(struct mh_h1 *c)
{
    if (c->in.cap - c->in.len >= 2048)
        return true;
    if (c->state == MH_H1_HANDLER || c->state == MH_H1_DRAIN) {
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
    size_t limit = (size_t)c->conn->h->limits->max_header_bytes + MH_BUF_CHUNK;
    if (c->in.cap < limit && mh_buf_reserve(&c->in, c->in.cap) == 0)
        return true;
    return c->in.cap > c->in.len;
}

/* Bytes read: into the read buffer, parsed and handled. */
static inline __attribute__((always_inline)) void take_input(struct mh_h1 *c, const char *small,
                                                             size_t n, bool borrowed)
{
    if (c->body_wanted)
        note_body_progress(c); /* a store: the timer re-arms for the later deadline */
    if (c->tunnel) {
        if (mh_buf_append(&c->req.body, small, n) < 0)
            return out_of_memory(c);
        process_input(c);
        return;
    }
    if (borrowed) {
        if (mh_buf_acquire(&c->in, c->conn->h->bufs) < 0)
            return out_of_memory(c);
        memcpy(c->in.data, small, n);
        c->in.len = n;
    } else {
        c->in.len += n;
    }
    if (c->state == MH_H1_IDLE)
        begin_head(c);
    process_input(c);
}

/* The socket is readable: a connection without a read buffer (idle, tunnel) reads to the stack. */
static void h1_read(struct mh_conn *conn)
{
    struct mh_h1 *c = conn->proto_state;
    char small[STACK_READ];
    bool borrowed = !c->in.data;
    char *dst = small;
    size_t room = sizeof small;
    if (!borrowed) {
        if (!make_room(c)) {
            if (c->state == MH_H1_HEAD || c->state == MH_H1_IDLE)
                fail(c, c->url_done ? 431 : 414);
            return;
        }
        dst = c->in.data + c->in.len;
        room = c->in.cap - c->in.len;
    }
    ssize_t n = mh_transport_read(&conn->tp, dst, room);
    if (n < 0)
        return mh_conn_read_failed(conn);
    if (n == 0) {
        c->req.peer_closed = conn->peer_closed = true;
        if (c->state == MH_H1_HANDLER)
            process_input(c); /* the handler finishes; a body it waits for will not come */
        else
            mh_conn_close(c->conn);
        return;
    }
    take_input(c, small, (size_t)n, borrowed);
}

/*
 * Switching protocols: the head is copied out of the read buffer (a few
 * hundred bytes instead of a pooled 16 KiB buffer per idle tunnel), bytes
 * the client sent after the head become body, and from here conn_read
 * appends what it reads to r->body through the stack buffer.
 */
static int h1_upgrade(struct mh_req *r)
{
    struct mh_h1 *c = h1_of(r);
    if (c->conn->closed || c->tunnel || r->res.head_sent || r->head.has_body ||
        r->head.http_minor == 0 || c->state != MH_H1_HANDLER)
        return -1;
    char *head = malloc(c->head_len ? c->head_len : 1);
    if (!head)
        return -1;
    const char *old = mh_h1_head(c);
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
    struct mh_req_route *rt = &r->routed;
    if (rt->path >= old && rt->path < old + c->head_len)
        rt->path = head + (rt->path - old);
    if (rt->path != rt->cleaned.data)
        mh_buf_free(&rt->cleaned);
    mh_request_shrink(&r->head);
    c->tunnel_head = head;
    c->tunnel = true;
    c->close_after = true;
    c->req.body_asked = true;
    c->tunnel_mark = 0;
    r->body_state = MH_BODY_MORE;
    c->in.len = c->parse_pos = c->req_start = 0;
    mh_buf_release(&c->in, c->conn->h->bufs);
    c->clock.read = c->clock.write = 0;
    set_handler_deadline(c);
    return 0;
}

static const struct mh_req_ops h1_req_ops = {
    .proto = "HTTP/1",
    .head = h1_head,
    .send = h1_send,
    .want_body = h1_want_body,
    .pending = h1_pending,
    .set_read_timeout = h1_set_read_timeout,
    .set_write_timeout = h1_set_write_timeout,
    .abort = h1_abort,
    .remote_addr = h1_remote_addr,
    .transport = h1_transport,
    .upgrade = h1_upgrade,
};

/* ---- the protocol table -------------------------------------------------- */

/* The connection's first bytes were HTTP/1's (or not HTTP/2's): a state, kept or new. */
static int h1_start(struct mh_conn *conn, const char *bytes, size_t n)
{
    struct mh_h1 *c = conn->proto_state;
    if (!c) {
        if (!(c = calloc(1, sizeof *c)))
            return -1;
        conn->proto_state = c;
    }
    /* keep the header array and the body buffer of a kept state */
    struct mh_req req = c->req;
    memset(c, 0, sizeof *c);
    c->req = req;
    mh_req_reset(&c->req);
    c->req.ops = &h1_req_ops;
    c->conn = conn;
    c->state = MH_H1_IDLE;
    mh_http_parser_init(c);
    take_input(c, bytes, n, true);
    return 0;
}

static void h1_close(struct mh_conn *conn)
{
    struct mh_h1 *c = conn->proto_state;
    if (c && c->in_handler) {
        c->req.closed = true;
        notify(c, c->req.handler->ops->on_abort);
    }
}

/* The state stays with the object for its next HTTP/1 connection, without its big buffers. */
static void h1_recycle(struct mh_conn *conn)
{
    struct mh_h1 *c = conn->proto_state;
    if (!c)
        return; /* h1_start failed */
    mh_buf_release(&c->in, conn->h->bufs);
    if (c->req.body.cap > MH_BUF_CHUNK)
        mh_buf_free(&c->req.body);
    free(c->tunnel_head);
    c->tunnel_head = NULL;
}

static void h1_destroy(void *state)
{
    struct mh_h1 *c = state;
    mh_req_free(&c->req);
    mh_buf_free(&c->in);
    free(c->tunnel_head);
    free(c);
}

static void h1_each_request(struct mh_conn *conn, void (*fn)(struct mh_req *r, void *ud), void *ud)
{
    struct mh_h1 *c = conn->proto_state;
    if (c->in_handler)
        fn(&c->req, ud);
}

const struct mh_conn_proto mh_h1_proto = {
    .name = "HTTP/1",
    .start = h1_start,
    .read = h1_read,
    .writable = mh_conn_flush,
    .flushed = h1_flushed,
    .timeout = h1_timeout,
    .stop = h1_stop,
    .close = h1_close,
    .recycle = h1_recycle,
    .destroy = h1_destroy,
    .each_request = h1_each_request,
};
