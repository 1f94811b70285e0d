#include "relay.h"

#include "req.h"
#include "socket.h"

#include <stdlib.h>
#include <string.h>

const char mh_relay_upstream_closed[] = "upstream closed";
const char mh_relay_client_closed[] = "client closed";
const char mh_relay_idle[] = "idle";

/* Buffer memory kept across writes by a busy relay; an idle one holds none above this. */
#define KEEP_BUF 16384

struct mh_relay {
    struct mh_handler handler; /* first: in front of the request's own (see relay.h) */
    const struct mh_handler *inner;
    struct mh_req *r;
    struct mh_socket *s;
    void *s_ud; /* s->ud before the relay borrowed it */
    struct ev_loop *loop;
    ev_timer timer;
    ev_tstamp last; /* loop time of the last byte either way */
    double idle;
    size_t max_buffer;
    struct mh_buf up_out; /* client bytes on their way to the upstream (being written) */
    size_t up_bytes, down_bytes;
    bool up_writing;     /* a write to the upstream is pending */
    bool up_reading;     /* a fill of the upstream is pending */
    bool client_waiting; /* want_body returned 0: on_body comes with more */
    bool down_paused;    /* the client's output is past the high-water mark */
    bool up_shut;        /* the client's EOF was passed on (upstream write side shut) */
    bool in_pump;        /* inside pump(): a callback it causes must not re-enter */
    bool again;          /* ...one did: pump once more */
    const char *why;     /* NULL while running */
    mh_relay_done_fn on_done;
    void *ud;
};

static const struct mh_handler_ops relay_handler_ops;

static struct mh_relay *relay_of(const struct mh_req *r)
{
    return (struct mh_relay *)r->handler; /* the handler is the first field */
}

/* Stops both directions and gives the request's events back to its handler. */
static void detach(struct mh_relay *x)
{
    ev_timer_stop(x->loop, &x->timer);
    if (x->s) {
        mh_socket_cancel(x->s);
        x->s->ud = x->s_ud;
    }
    if (x->r && x->r->handler == &x->handler)
        x->r->handler = x->inner;
}

static void end(struct mh_relay *x, const char *why)
{
    if (x->why)
        return;
    x->why = why;
    detach(x);
    x->on_done(x->ud, why);
}

static void touch(struct mh_relay *x)
{
    x->last = ev_now(x->loop);
}

static void on_up_written(struct mh_socket *s, const char *err);
static void on_up_read(struct mh_socket *s, const char *err);
static void pump(struct mh_relay *x);

/*
 * Client -> upstream. The client's bytes collect in r->body; when no write
 * is pending they are swapped into up_out (no copy) and written. The client
 * is asked for more while less than max_buffer waits, so a write in flight
 * and the next read overlap without the buffer growing past the bound.
 */
static void to_upstream(struct mh_relay *x)
{
    struct mh_req *r = x->r;
    for (;;) {
        if (!x->up_writing && r->body.len) {
            struct mh_buf t = x->up_out;
            x->up_out = r->body;
            r->body = t;
            r->body.len = 0;
            x->up_bytes += x->up_out.len;
            touch(x);
            const char *err = NULL;
            int rc = mh_socket_write(x->s, x->up_out.data, x->up_out.len, 0, on_up_written, &err);
            if (rc < 0)
                return end(x, mh_relay_upstream_closed);
            if (rc == 0)
                x->up_writing = true;
            else
                x->up_out.len = 0;
            continue;
        }
        if (r->body_state != MH_BODY_MORE) {
            /* The client's side ended: pass its EOF on once the bytes before it are written. */
            if (!x->up_writing && !x->up_shut && r->body.len == 0) {
                x->up_shut = true;
                mh_transport_shutdown(&x->s->tr);
            }
            return;
        }
        if (x->client_waiting || r->body.len >= x->max_buffer)
            return;
        if (!mh_req_want_body(r, false)) {
            x->client_waiting = true;
            return;
        }
    }
}

/* Upstream -> client: what the socket holds is staged and flushed, then the socket is read. */
static void to_client(struct mh_relay *x)
{
    struct mh_req *r = x->r;
    struct mh_socket *s = x->s;
    while (!x->up_reading) {
        if (s->in.len) {
            x->down_bytes += s->in.len;
            touch(x);
            const char *err = mh_req_write(r, s->in.data, s->in.len);
            s->in.len = 0;
            if (err)
                return end(x, mh_relay_client_closed);
            mh_req_flush(r);
            if (s->in.cap > KEEP_BUF)
                mh_buf_free(&s->in);
        }
        if (r->closed)
            return end(x, mh_relay_client_closed);
        if (s->eof)
            return end(x, mh_relay_upstream_closed);
        if (mh_req_output_high(r)) {
            x->down_paused = true; /* on_writable resumes */
            return;
        }
        const char *err = NULL;
        int rc = mh_socket_fill(s, 0, on_up_read, &err);
        if (rc < 0)
            return end(x, mh_relay_upstream_closed); /* reset: the same end for the client */
        if (rc == 0)
            x->up_reading = true;
    }
}

/*
 * Both directions, as far as they can go now. Callbacks reached from inside
 * (on_abort from a flush that failed) only mark `again`.
 */
static void pump(struct mh_relay *x)
{
    if (x->in_pump) {
        x->again = true;
        return;
    }
    x->in_pump = true;
    do {
        x->again = false;
        if (!x->why && !x->down_paused)
            to_client(x);
        if (!x->why)
            to_upstream(x);
        if (!x->why && x->r->closed)
            end(x, mh_relay_client_closed);
    } while (x->again && !x->why);
    x->in_pump = false;
}

static void on_up_written(struct mh_socket *s, const char *err)
{
    struct mh_relay *x = s->ud;
    x->up_writing = false;
    x->up_out.len = 0;
    if (x->up_out.cap > KEEP_BUF)
        mh_buf_free(&x->up_out);
    if (err)
        return end(x, mh_relay_upstream_closed);
    touch(x);
    pump(x);
}

static void on_up_read(struct mh_socket *s, const char *err)
{
    struct mh_relay *x = s->ud;
    x->up_reading = false;
    if (err)
        return end(x, mh_relay_upstream_closed);
    pump(x);
}

/* Each byte only stores `last`; the timer, when it fires early, re-arms for the rest. */
static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_relay *x = t->data;
    (void)revents;
    ev_tstamp due = x->last + x->idle;
    ev_tstamp now = ev_now(loop);
    if (due > now) {
        ev_timer_set(t, due - now, 0.);
        ev_timer_start(loop, t);
        return;
    }
    end(x, mh_relay_idle);
}

/* ---- the relay as the request's handler ---------------------------------------- */

static void relay_on_body(struct mh_req *r)
{
    struct mh_relay *x = relay_of(r);
    x->client_waiting = false;
    pump(x);
}

static void relay_on_writable(struct mh_req *r)
{
    struct mh_relay *x = relay_of(r);
    x->down_paused = false;
    pump(x);
}

static void relay_on_abort(struct mh_req *r)
{
    struct mh_relay *x = relay_of(r);
    const struct mh_handler *inner = x->inner;
    end(x, mh_relay_client_closed); /* gives r->handler back */
    if (inner->ops->on_abort)
        inner->ops->on_abort(r);
}

static const struct mh_handler_ops relay_handler_ops = {
    .name = "relay",
    .on_body = relay_on_body,
    .on_writable = relay_on_writable,
    .on_abort = relay_on_abort,
};

struct mh_relay *mh_relay_start(struct mh_req *r, struct mh_socket *s, struct ev_loop *loop,
                                double idle_timeout, size_t max_buffer, mh_relay_done_fn on_done,
                                void *ud)
{
    struct mh_relay *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->handler.ops = &relay_handler_ops;
    x->inner = r->handler;
    x->r = r;
    x->s = s;
    x->s_ud = s->ud;
    s->ud = x;
    x->loop = loop;
    x->idle = idle_timeout;
    x->max_buffer = max_buffer ? max_buffer : 1;
    x->on_done = on_done;
    x->ud = ud;
    r->handler = &x->handler;
    ev_init(&x->timer, on_timer);
    x->timer.data = x;
    touch(x);
    if (idle_timeout > 0) {
        ev_timer_set(&x->timer, idle_timeout, 0.);
        ev_timer_start(loop, &x->timer);
    }
    pump(x);
    return x;
}

const struct mh_handler *mh_relay_inner(const struct mh_req *r)
{
    if (!r->handler || r->handler->ops != &relay_handler_ops)
        return NULL;
    return relay_of(r)->inner;
}

void mh_relay_counts(const struct mh_relay *x, size_t *up, size_t *down)
{
    *up = x->up_bytes;
    *down = x->down_bytes;
}

void mh_relay_free(struct mh_relay *x)
{
    if (!x)
        return;
    if (!x->why)
        detach(x);
    mh_buf_free(&x->up_out);
    free(x);
}
