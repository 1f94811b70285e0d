#include "conn.h"

#include "dispatch.h"
#include "http_parse.h"
#include "log.h"
#include "lua_sched.h"
#include "lua_vm.h"
#include "tls.h"
#include "worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LINGER_SECONDS 2.0
/* A request body left unread is discarded up to this much to keep the connection. */
#define DRAIN_MAX (256 * 1024)

static void conn_process(struct mh_conn *c);
static void next_request(struct mh_conn *c);
static void update_io(struct mh_conn *c);

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
    struct mh_worker *w = c->worker;
    if (c->on_idle_list == idle)
        return;
    list_remove(c->on_idle_list ? &w->idle : &w->active, c);
    list_push(idle ? &w->idle : &w->active, c);
    c->on_idle_list = idle;
}

/* `seconds` from now as a deadline; 0 (off) stays 0. */
static ev_tstamp after(struct mh_conn *c, double seconds)
{
    return seconds > 0 ? ev_now(c->worker->loop) + seconds : 0;
}

static ev_tstamp earliest(ev_tstamp a, ev_tstamp b)
{
    if (a == 0)
        return b;
    if (b == 0)
        return a;
    return a < b ? a : b;
}

/*
 * One timer per connection. Moving a deadline later only stores it; the
 * timer, when it fires early, re-arms for the rest ("be smart about
 * timeouts" in libev's manual), so per-request timer work is a store. It
 * serves two deadlines: the state's (c->deadline) and, while output waits
 * for a client that does not read, the send deadline (c->send_deadline).
 */
static void arm_timer(struct mh_conn *c)
{
    struct ev_loop *loop = c->worker->loop;
    ev_tstamp at = earliest(c->deadline, c->send_deadline);
    if (at == 0)
        return;
    if (!ev_is_active(&c->timer) || c->timer_at > at) {
        ev_tstamp in = at - ev_now(loop);
        ev_timer_stop(loop, &c->timer);
        ev_timer_set(&c->timer, in > 0 ? in : 0., 0.);
        ev_timer_start(loop, &c->timer);
        c->timer_at = at;
    }
}

static void set_deadline(struct mh_conn *c, ev_tstamp at)
{
    c->deadline = at;
    arm_timer(c);
}

static void set_timeout(struct mh_conn *c, double seconds)
{
    set_deadline(c, after(c, seconds));
}

/* While a handler runs: the write deadline, and the read deadline while body bytes are due. */
static void set_handler_deadline(struct mh_conn *c)
{
    set_deadline(c,
                 earliest(c->write_deadline, c->body_state == MH_BODY_MORE ? c->read_deadline : 0));
}

void mh_conn_set_read_timeout(struct mh_conn *c, double seconds)
{
    c->read_deadline = after(c, seconds);
    if (c->state == MH_CONN_HANDLER)
        set_handler_deadline(c);
}

void mh_conn_set_write_timeout(struct mh_conn *c, double seconds)
{
    c->write_deadline = after(c, seconds);
    if (c->state == MH_CONN_HANDLER)
        set_handler_deadline(c);
}

/*
 * Output is waiting for the client: it must take some of it within
 * send_timeout, counted again from each write that made progress (nginx's
 * send_timeout). A slow but steady reader is never cut, however long the
 * response; one that stops reading is.
 */
static void note_send_progress(struct mh_conn *c, bool progressed, bool blocked)
{
    double limit = c->worker->config->send_timeout;
    if (!blocked || limit <= 0) {
        c->send_deadline = 0;
        return;
    }
    if (progressed || c->send_deadline == 0) {
        c->send_deadline = after(c, limit);
        arm_timer(c);
    }
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
               c->worker->config->send_timeout);
        mh_conn_close(c);
        return;
    }
    switch (c->state) {
    case MH_CONN_HEAD:
        mh_log(MH_LOG_DEBUG, "fd %d: request head timed out", c->fd);
        break;
    case MH_CONN_HANDLER:
        if (c->body_state == MH_BODY_MORE && c->read_deadline && now >= c->read_deadline &&
            (!c->write_deadline || now < c->write_deadline)) {
            /* The body is late: the handler hears "timeout" and may still answer. */
            c->body_state = MH_BODY_TIMEOUT;
            c->close_after = true;
            set_deadline(c, c->write_deadline);
            if (c->body_wanted && c->task) {
                c->body_wanted = false;
                mh_task_on_body(c->task);
            }
            update_io(c);
            return;
        }
        mh_log(MH_LOG_WARN, "fd %d: write timeout: response not done in time; closing", c->fd);
        break;
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
    if (want_read && !c->peer_closed)
        ev |= c->tp.wants & MH_TRANSPORT_READ_WANTS_WRITE ? EV_WRITE : EV_READ;
    if (c->want_write)
        ev |= c->tp.wants & MH_TRANSPORT_WRITE_WANTS_READ ? EV_READ : EV_WRITE;
    struct ev_loop *loop = c->worker->loop;
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

void mh_conn_schedule_write(struct mh_conn *c)
{
    struct mh_worker *w = c->worker;
    if (c->in_pending || c->closed || c->out.len == c->out_sent)
        return;
    c->in_pending = true;
    c->next_pending = w->pending_writes;
    w->pending_writes = c;
    mh_conn_ref(c);
}

void mh_conn_flush(struct mh_conn *c)
{
    struct mh_worker *w = c->worker;
    bool progressed = false;
    while (!c->closed && c->out_sent < c->out.len) {
        ssize_t n = mh_transport_write(&c->tp, c->out.data + c->out_sent, c->out.len - c->out_sent);
        if (n > 0) {
            c->out_sent += (size_t)n;
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
    c->out.len = c->out_sent = 0;
    c->want_write = false;
    note_send_progress(c, true, false);
    if (c->state == MH_CONN_LINGER) {
        /*
         * Half-close and read what the client still sends: closing with
         * unread input would make the kernel send a reset that can destroy
         * the response before the client reads it.
         */
        mh_transport_shutdown(&c->tp);
        if (c->peer_closed) {
            mh_conn_close(c);
            return;
        }
        set_timeout(c, LINGER_SECONDS);
    } else if (c->state == MH_CONN_IDLE) {
        mh_buf_release(&c->out, &w->bufs);
    }
    if (c->task)
        mh_task_on_writable(c->task);
    update_io(c);
}

/* ---- lifecycle ----------------------------------------------------------- */

static void on_io(struct ev_loop *loop, ev_io *io, int revents);

struct mh_conn *mh_conn_accept(struct mh_worker *w, struct mh_listener *l, int fd,
                               const struct sockaddr_storage *peer, socklen_t plen)
{
    struct mh_conn *c = w->free_conns;
    if (c) {
        w->free_conns = c->next;
    } else if (!(c = calloc(1, sizeof *c))) {
        return NULL;
    }
    struct mh_request req = c->req;
    struct mh_response res = c->res;
    struct mh_buf body = c->body;
    memset(c, 0, sizeof *c);
    c->req = req; /* keep the header array and buffers of a pooled object */
    c->res = res;
    c->body = body;
    c->body.len = 0;
    mh_request_reset(&c->req);
    mh_response_reset(&c->res);
    c->worker = w;
    c->fd = fd;
    c->state = MH_CONN_IDLE;
    if (l && l->tls) {
        if (mh_tls_accept(l->tls, &c->tp, fd) < 0) {
            c->next = w->free_conns;
            w->free_conns = c;
            return NULL;
        }
    } else {
        mh_transport_plain_init(&c->tp, fd);
    }
    memcpy(&c->peer, peer, plen);
    c->peer_len = plen;
    mh_http_parser_init(c);
    ev_io_init(&c->io, on_io, fd, 0);
    c->io.data = c;
    ev_init(&c->timer, on_timer);
    c->timer.data = c;
    w->nconns++;
    list_push(&w->idle, c);
    c->on_idle_list = true;
    /* A new connection gets the header timeout: it owes us a request. */
    set_timeout(c, w->config->read_header_timeout);
    update_io(c);
    return c;
}

void mh_conn_close(struct mh_conn *c)
{
    if (c->closed)
        return;
    struct mh_worker *w = c->worker;
    c->closed = true;
    ev_io_stop(w->loop, &c->io);
    ev_timer_stop(w->loop, &c->timer);
    mh_transport_close(&c->tp);
    c->fd = -1;
    list_remove(c->on_idle_list ? &w->idle : &w->active, c);
    w->nconns--;
    c->next_closed = w->closed;
    w->closed = c;
    mh_conn_ref(c); /* the closed list's reference, dropped by mh_conn_destroy */
    if (c->task)
        mh_task_on_conn_closed(c->task);
    mh_worker_maybe_resume_accept(w);
}

void mh_conn_ref(struct mh_conn *c)
{
    c->refs++;
}

void mh_conn_unref(struct mh_conn *c)
{
    c->refs--;
}

void mh_conn_destroy(struct mh_conn *c)
{
    struct mh_worker *w = c->worker;
    mh_buf_release(&c->in, &w->bufs);
    mh_buf_release(&c->out, &w->bufs);
    if (c->body.cap > MH_BUF_CHUNK)
        mh_buf_free(&c->body);
    if (c->gen) {
        mh_gen_unref(c->gen);
        c->gen = NULL;
    }
    c->next = w->free_conns;
    w->free_conns = c;
}

bool mh_conn_close_if_idle(struct mh_conn *c)
{
    if (c->state != MH_CONN_IDLE || c->out_sent < c->out.len)
        return false;
    mh_conn_close(c);
    return true;
}

const char *mh_conn_remote_addr(const struct mh_conn *c, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];
    int port = 0;
    if (c->peer.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&c->peer;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        port = ntohs(a->sin_port);
        snprintf(buf, len, "%s:%d", ip, port);
    } else {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&c->peer;
        if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
            inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], ip, sizeof ip);
        else
            inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        port = ntohs(a->sin6_port);
        snprintf(buf, len, strchr(ip, ':') ? "[%s]:%d" : "%s:%d", ip, port);
    }
    return buf;
}

/* ---- responses ----------------------------------------------------------- */

void mh_conn_head_ctx(struct mh_conn *c, struct mh_head_ctx *ctx, bool complete)
{
    struct mh_worker *w = c->worker;
    ctx->date_line = mh_worker_date(w, &ctx->date_len);
    ctx->http_minor = c->req.http_minor;
    ctx->head_method = c->req.method == HTTP_HEAD;
    bool keep = c->req.keep_alive && !c->res.close && !c->close_after && !w->shutting_down &&
                !c->peer_closed;
    long max = w->config->keepalive_requests;
    if (max > 0 && c->requests >= (unsigned long)max)
        keep = false;
    /* An HTTP/1.0 body of unknown length ends when we close. */
    if (!complete && c->req.http_minor == 0 && !c->res.has_length)
        keep = false;
    ctx->keep_alive = keep;
}

/* Output failed for lack of memory: nothing sensible can follow. */
static void out_of_memory(struct mh_conn *c)
{
    mh_log(MH_LOG_ERROR, "fd %d: out of memory building a response; closing", c->fd);
    mh_conn_close(c);
}

void mh_conn_flush_response(struct mh_conn *c)
{
    if (c->closed || (c->res.head_sent && c->res.body.len == 0))
        return;
    if (mh_buf_acquire(&c->out, &c->worker->bufs) < 0)
        return out_of_memory(c);
    struct mh_head_ctx ctx;
    mh_conn_head_ctx(c, &ctx, false);
    if (!ctx.keep_alive)
        c->close_after = true;
    if (mh_response_emit(&c->res, &c->out, &ctx, false) < 0)
        return out_of_memory(c);
    mh_conn_schedule_write(c);
}

/*
 * Switches to closing once the output is written. What is still queued may
 * be a long download: send_timeout guards it (and write_timeout, when set),
 * not a fixed deadline; LINGER_SECONDS starts once it is out.
 */
static void start_linger(struct mh_conn *c)
{
    const struct mh_config *cfg = c->worker->config;
    c->state = MH_CONN_LINGER;
    set_idle_list(c, false);
    set_timeout(c, cfg->write_timeout > 0 ? cfg->write_timeout : cfg->send_timeout > 0 ? 0 : 30);
    if (c->out_sent == c->out.len)
        mh_conn_flush(c); /* nothing queued: shut the write side now */
    else
        mh_conn_schedule_write(c);
    update_io(c);
}

static void release_gen(struct mh_conn *c)
{
    if (c->gen) {
        mh_gen_unref(c->gen);
        c->gen = NULL;
    }
}

void mh_conn_finish_response(struct mh_conn *c)
{
    c->task = NULL;
    if (c->closed) {
        release_gen(c);
        return;
    }
    struct mh_response *res = &c->res;
    if (c->body_state == MH_BODY_TOO_LARGE && !res->head_sent) {
        res->status = 413;
        res->body.len = 0;
        res->headers.len = 0;
        res->has_type = res->has_length = false;
        mh_buf_append_str(&res->body, "request body too large\n");
    }
    bool drainable = true;
    if (c->body_state == MH_BODY_MORE) {
        /* A client waiting for "100 Continue" may never send the body. */
        if (c->req.expect_continue && !c->continue_sent)
            drainable = false;
        else if (!(c->parser.flags & F_CHUNKED) &&
                 c->req.content_length - c->body_received > DRAIN_MAX)
            drainable = false;
    } else if (c->body_state != MH_BODY_NONE) {
        drainable = false;
    }
    if (!drainable)
        c->close_after = true;
    struct mh_head_ctx ctx;
    mh_conn_head_ctx(c, &ctx, true);
    if (mh_buf_acquire(&c->out, &c->worker->bufs) < 0 ||
        mh_response_emit(res, &c->out, &ctx, true) < 0)
        return out_of_memory(c);
    if (c->worker->observe)
        mh_worker_observe(c->worker, c);
    release_gen(c); /* after observe: the matched route belongs to the generation */
    if (!ctx.keep_alive || c->close_after) {
        start_linger(c);
        return;
    }
    mh_conn_schedule_write(c);
    if (c->body_state == MH_BODY_MORE) {
        c->state = MH_CONN_DRAIN;
        c->draining = true;
        c->body.len = 0;
        set_timeout(c, c->worker->config->read_header_timeout);
    } else {
        next_request(c);
    }
    if (!c->processing)
        conn_process(c);
}

void mh_conn_respond_simple(struct mh_conn *c, int status, const char *extra, const char *body)
{
    struct mh_response *res = &c->res;
    res->status = status;
    if (extra)
        mh_buf_append_str(&res->headers, extra);
    if (body)
        mh_buf_append_str(&res->body, body);
    mh_conn_finish_response(c);
}

/* A request that cannot be handled: answer `status` (if any) and close. */
static void fail(struct mh_conn *c, int status)
{
    if (status) {
        mh_log(MH_LOG_DEBUG, "fd %d: bad request: %d", c->fd, status);
        struct mh_head_ctx ctx;
        mh_conn_head_ctx(c, &ctx, true);
        ctx.keep_alive = false;
        ctx.http_minor = 1;
        ctx.head_method = false;
        char body[64];
        snprintf(body, sizeof body, "%d %s\n", status, mh_status_text(status));
        if (mh_buf_acquire(&c->out, &c->worker->bufs) < 0 ||
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
    struct mh_config *cfg = c->worker->config;
    c->state = MH_CONN_HEAD;
    set_idle_list(c, false);
    c->read_deadline = after(c, cfg->read_timeout);
    set_deadline(c, earliest(after(c, cfg->read_header_timeout), c->read_deadline));
}

static void next_request(struct mh_conn *c)
{
    struct mh_worker *w = c->worker;
    c->req_start = c->parse_pos;
    c->head_len = 0;
    mh_request_reset(&c->req);
    mh_response_reset(&c->res);
    c->body_state = MH_BODY_NONE;
    c->body.len = 0;
    c->body_received = 0;
    c->body_wanted = c->continue_sent = c->draining = false;
    c->last_was_value = c->url_done = false;
    if (c->parse_pos < c->in.len) {
        begin_head(c); /* pipelined bytes are waiting */
        return;
    }
    c->state = MH_CONN_IDLE;
    c->in.len = c->parse_pos = c->req_start = 0;
    mh_buf_release(&c->in, &w->bufs);
    set_idle_list(c, true);
    set_timeout(c, w->config->idle_timeout);
    if (w->shutting_down)
        mh_conn_close_if_idle(c);
}

static void start_request(struct mh_conn *c)
{
    struct mh_worker *w = c->worker;
    c->state = MH_CONN_HANDLER;
    c->requests++;
    c->started = ev_now(w->loop);
    c->max_body = (uint64_t)w->config->max_body_bytes;
    c->body_asked = false;
    c->write_deadline = after(c, w->config->write_timeout);
    if (c->req.has_body) {
        c->body_state = MH_BODY_MORE;
    } else {
        /* llhttp completes a bodiless message on its next (empty) step: take it now. */
        int status;
        mh_http_parse(c, &status);
        c->body_state = MH_BODY_NONE;
    }
    set_handler_deadline(c);
    c->gen = w->gen;
    mh_gen_ref(c->gen);
    mh_dispatch(c);
}

/* Parses body bytes for a waiting handler; true once it can go on. */
static bool pump_body(struct mh_conn *c)
{
    while (c->body_state == MH_BODY_MORE && (c->body_want_all || c->body.len == 0) &&
           c->parse_pos < c->in.len) {
        int status;
        switch (mh_http_parse(c, &status)) {
        case MH_PARSE_MESSAGE_DONE:
            c->body_state = MH_BODY_NONE;
            set_handler_deadline(c);
            break;
        case MH_PARSE_ERROR:
            if (c->body_state != MH_BODY_TOO_LARGE)
                c->body_state = MH_BODY_BAD;
            break;
        default:
            break;
        }
    }
    if (c->body_state == MH_BODY_MORE && c->peer_closed)
        c->body_state = MH_BODY_BAD;
    return c->body_state != MH_BODY_MORE || (!c->body_want_all && c->body.len > 0);
}

int mh_conn_set_max_body(struct mh_conn *c, uint64_t bytes)
{
    if (c->body_asked)
        return -1;
    c->max_body = bytes;
    return 0;
}

int mh_conn_want_body(struct mh_conn *c, bool all)
{
    if (c->closed)
        return 1;
    if (!c->body_asked) {
        c->body_asked = true;
        /* Refused before a byte is read, and before "100 Continue" invites it. */
        if (c->body_state == MH_BODY_MORE && !(c->parser.flags & F_CHUNKED) &&
            c->req.content_length > c->max_body) {
            c->body_state = MH_BODY_TOO_LARGE;
            return 1;
        }
    }
    if (c->req.expect_continue && !c->continue_sent && c->body_state == MH_BODY_MORE &&
        c->body_received == 0 && !c->res.head_sent) {
        if (mh_buf_acquire(&c->out, &c->worker->bufs) == 0 &&
            mh_buf_append(&c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0)
            mh_conn_schedule_write(c);
        c->continue_sent = true;
    }
    c->body_want_all = all;
    if (pump_body(c))
        return 1;
    c->body_wanted = true;
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
    struct mh_worker *w = c->worker;
    if (c->processing)
        return;
    c->processing = true;
    mh_conn_ref(c);
    while (!c->closed && c->state != MH_CONN_LINGER) {
        if (c->state == MH_CONN_HANDLER) {
            if (c->body_wanted && pump_body(c)) {
                c->body_wanted = false;
                if (c->task)
                    mh_task_on_body(c->task);
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
                c->parse_pos - c->req_start > (size_t)w->config->max_header_bytes)
                fail(c, c->url_done ? 431 : 414);
            goto out;
        case MH_PARSE_HEAD_DONE:
            set_idle_list(c, false);
            if (c->head_len > (size_t)w->config->max_header_bytes) {
                fail(c, 431);
                goto out;
            }
            start_request(c);
            break;
        case MH_PARSE_MESSAGE_DONE:
            if (c->state == MH_CONN_DRAIN) {
                c->body_state = MH_BODY_NONE;
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
    mh_conn_unref(c);
}

/*
 * Makes room in the read buffer. Bytes before the current request are
 * dropped; while a request is being answered its head must stay, but body
 * bytes already parsed (copied to c->body) can go.
 */
static bool make_room(struct mh_conn *c)
{
    struct mh_worker *w = c->worker;
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
    size_t limit = (size_t)w->config->max_header_bytes + MH_BUF_CHUNK;
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

static void conn_read(struct mh_conn *c)
{
    struct mh_worker *w = c->worker;
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
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        mh_log(MH_LOG_DEBUG, "fd %d: read: %s", c->fd, strerror(errno));
        mh_conn_close(c);
        return;
    }
    if (n == 0) {
        c->peer_closed = true;
        switch (c->state) {
        case MH_CONN_HANDLER:
            /* The handler finishes; a body it waits for will not come. */
            conn_process(c);
            break;
        case MH_CONN_LINGER:
            if (c->out_sent == c->out.len)
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
    if (borrowed) {
        if (mh_buf_acquire(&c->in, &w->bufs) < 0)
            return out_of_memory(c);
        memcpy(c->in.data, small, (size_t)n);
        c->in.len = (size_t)n;
    } else {
        c->in.len += (size_t)n;
    }
    if (c->state == MH_CONN_IDLE)
        begin_head(c);
    conn_process(c);
}

static void on_io(struct ev_loop *loop, ev_io *io, int revents)
{
    struct mh_conn *c = io->data;
    (void)loop;
    int read_ev = c->tp.wants & MH_TRANSPORT_READ_WANTS_WRITE ? EV_WRITE : EV_READ;
    int write_ev = c->tp.wants & MH_TRANSPORT_WRITE_WANTS_READ ? EV_READ : EV_WRITE;
    mh_conn_ref(c);
    if (c->want_write && (revents & write_ev))
        mh_conn_flush(c);
    if (!c->closed && (revents & read_ev))
        conn_read(c);
    mh_conn_unref(c);
}
