/*
 * http.proxy's bodies, moved in C (lua/moonhttp/proxy.lua calls these once
 * per request, no Lua per chunk):
 *
 *   core.proxy_upload(resp, req, length|true) → true, false (the upstream
 *     answered early: stop sending), or nil, kind, detail (nil, "stand-in"
 *     for a req that is not the running handler's own: proxy.lua's loop). The request's
 *     body goes up over resp's streamed exchange (core.proxy_fetch with a
 *     stream), framed by its declared length or chunked; then
 *     core.fetch_head(resp) waits for the answer.
 *   core.proxy_relay(res, resp, req) → true (the body and its trailers
 *     passed down, or the client went away, or a graceful stop), or nil,
 *     kind, detail (the upstream failed mid-body: the caller cuts the
 *     client's stream rather than end it as if complete).
 *
 * Back-pressure as relay.c's: one piece in flight upstream, and the client
 * is read again only when it is written (a slow upstream slows the client's
 * upload); the upstream is read only while the client's output is below
 * the response's high-water mark (a slow client slows the upstream read).
 * Memory stays a piece or two whatever the body's size.
 *
 * While a pump runs it is in front of the request's handler for the
 * stream's events (on_body, on_writable, on_abort, as relay.c is) and in
 * place of the response's on_event; both are given back when it ends. The
 * task waits as a waiting call: a graceful stop (lua_handler.c looks past
 * the pump) cancels it, and core.proxy_relay answers nil, "stopping".
 */
#include "lua_proxy_body.h"

#include "buf.h"
#include "client.h"
#include "hop.h"
#include "lua_client.h"
#include "lua_sched.h"
#include "req.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Memory a pump keeps for its piece between writes; more is let go after each. */
#define KEEP_BUF 16384

static const char END_DONE[] = "done";
static const char END_EARLY[] = "early";
static const char END_CLIENT[] = "client closed";

struct pump {
    struct mh_handler handler; /* first: in front of the request's own */
    const struct mh_handler *inner;
    struct mh_req *r;
    struct mh_client_req *q;
    mh_client_cb q_cb; /* the response's own event callback and data, given back */
    void *q_ud;
    struct mh_task *t; /* set once the task waits */
    bool down;         /* the response body to the client; else the request body up */
    /* up */
    lua_Integer length; /* declared, or -1: chunked */
    uint64_t sent;
    struct mh_buf piece; /* being written upstream */
    bool sending, client_waiting, last; /* last: the body's end is handed over */
    /* down */
    bool paused; /* the client's output is past the high-water mark */
    bool in_pump, again;
    const char *why;    /* NULL while running: END_*, or an error for the caller */
    const char *detail; /* the error's text (an upstream error, a client body error) */
    bool upstream_err;  /* why is the exchange's error (kind from client_err) */
};

static const struct mh_handler_ops pump_ops;

static struct pump *pump_of(const struct mh_req *r)
{
    return (struct pump *)r->handler; /* the handler is the first field */
}

/* Gives the request's events and the response's back to their owners. */
static void detach(struct pump *p)
{
    if (p->r && p->r->handler == &p->handler)
        p->r->handler = p->inner;
    if (p->q && p->q->ud == p) {
        p->q->on_event = p->q_cb;
        p->q->ud = p->q_ud;
    }
}

static void end(struct pump *p, const char *why)
{
    if (p->why)
        return;
    p->why = why;
    detach(p);
    if (p->t)
        mh_task_wake(p->t);
}

static void fail_upstream(struct pump *p)
{
    p->upstream_err = true;
    p->detail = p->q->err;
    end(p, p->q->err);
}

/* ---- the request body, up ------------------------------------------------------- */

/* The next piece of the client's body into p->piece, framed; false when there is none now. */
static bool take_piece(struct pump *p)
{
    struct mh_req *r = p->r;
    if (!r->body.len)
        return false;
    p->sent += r->body.len;
    if (p->length >= 0) {
        if (p->sent > (uint64_t)p->length) {
            p->detail = "body longer than its Content-Length";
            end(p, "body");
            return false;
        }
        struct mh_buf t = p->piece; /* the bytes as they are: swapped, not copied */
        p->piece = r->body;
        r->body = t;
        r->body.len = 0;
        return true;
    }
    char size[24];
    int n = snprintf(size, sizeof size, "%zx\r\n", r->body.len);
    p->piece.len = 0;
    if (mh_buf_append(&p->piece, size, (size_t)n) < 0 ||
        mh_buf_append(&p->piece, r->body.data, r->body.len) < 0 ||
        mh_buf_append(&p->piece, "\r\n", 2) < 0) {
        p->detail = "out of memory";
        end(p, "nomem");
        return false;
    }
    r->body.len = 0;
    return true;
}

/* Hands a piece (or the end) to the exchange: true while it is being written. */
static bool send_piece(struct pump *p, const char *data, size_t len, bool last)
{
    p->last = last;
    p->sending = mh_client_send(p->q, data, len, last);
    if (p->sending)
        return true;
    if (p->q->err)
        fail_upstream(p);
    else if (p->q->early)
        end(p, END_EARLY);
    else if (last)
        end(p, END_DONE);
    return false;
}

static void pump_up(struct pump *p)
{
    struct mh_req *r = p->r;
    while (!p->why && !p->sending) {
        if (p->piece.cap > KEEP_BUF)
            mh_buf_free(&p->piece);
        if (take_piece(p)) {
            send_piece(p, p->piece.data, p->piece.len, false);
            continue;
        }
        if (p->why)
            return;
        if (r->closed) {
            /* the client went away mid-upload: the exchange is cut, never parked */
            p->detail = "connection closed";
            return end(p, "body");
        }
        if (r->body_state == MH_BODY_NONE) {
            if (p->length >= 0 && p->sent < (uint64_t)p->length) {
                p->detail = "body shorter than its Content-Length";
                return end(p, "body");
            }
            if (p->length >= 0)
                send_piece(p, "", 0, true);
            else
                send_piece(p, "0\r\n\r\n", 5, true);
            return;
        }
        if (r->body_state != MH_BODY_MORE) {
            p->detail = mh_req_body_error(r);
            return end(p, "body");
        }
        if (p->client_waiting)
            return;
        if (!mh_req_want_body(r, false))
            p->client_waiting = true;
    }
}

/* ---- the response body, down ---------------------------------------------------- */

/* The upstream's trailers after the body, where the client's framing has a place for them. */
static void pass_trailers(struct pump *p)
{
    struct mh_req *r = p->r;
    size_t len;
    const char *f = mh_client_trailers(p->q, &len), *end = f + len;
    if (!len || (r->head.http_major == 1 && r->head.http_minor == 0) || r->res.has_length)
        return;
    mh_req_flush(r); /* trailers ride a streamed (chunked) body */
    if (r->head.http_major == 1 && !r->res.chunked)
        return;
    while (f < end) {
        size_t nl = strnlen(f, (size_t)(end - f));
        const char *v = f + nl + 1;
        if (v >= end)
            break;
        size_t vl = strnlen(v, (size_t)(end - v));
        /* one at a time: a field that cannot be a trailer (Content-Length...) is dropped alone */
        if (!mh_hop_is_standard(f, nl))
            (void)mh_response_trailer(&r->res, f, nl, v, vl);
        f = v + vl + 1;
    }
}

static void pump_down(struct pump *p)
{
    struct mh_req *r = p->r;
    struct mh_client_req *q = p->q;
    while (!p->why) {
        if (r->closed)
            return end(p, END_CLIENT);
        size_t len;
        const char *b = mh_client_body(q, &len);
        if (len) {
            const char *err = mh_req_write(r, b, len);
            mh_client_body_consume(q, len);
            if (err == mh_req_err_closed)
                return end(p, END_CLIENT);
            if (err) {
                p->detail = "out of memory";
                return end(p, "nomem");
            }
            if (!q->body_done)
                mh_req_flush(r); /* more is coming: send what is here now (SSE) */
            continue;
        }
        if (q->err)
            return fail_upstream(p);
        if (q->body_done || !q->conn) {
            pass_trailers(p);
            return end(p, END_DONE);
        }
        if (mh_req_output_high(r)) {
            p->paused = true; /* on_writable resumes */
            return;
        }
        if (mh_client_body_want(q, false))
            return; /* on_event resumes */
        mh_client_body(q, &len);
        if (!len && !q->err && !q->body_done && q->conn) {
            /* nothing to read and nothing to wait for: cannot happen by client.h's contract */
            p->detail = "internal error: no data and nothing to wait for";
            return end(p, "internal");
        }
    }
}

/* As far as the pump can go now; what it causes meanwhile (an abort in a flush) marks again. */
static void pump(struct pump *p)
{
    if (p->in_pump) {
        p->again = true;
        return;
    }
    p->in_pump = true;
    do {
        p->again = false;
        if (p->down && !p->paused)
            pump_down(p);
        else if (!p->down)
            pump_up(p);
    } while (p->again && !p->why);
    p->in_pump = false;
}

/* ---- events ------------------------------------------------------------------------ */

static void on_exchange(struct mh_client_req *q, enum mh_client_event ev)
{
    struct pump *p = q->ud;
    if (ev == MH_CLIENT_SEND)
        p->sending = false;
    if (!p->down && ev == MH_CLIENT_SEND) {
        if (q->err)
            return fail_upstream(p);
        if (q->early)
            return end(p, END_EARLY);
        if (p->last)
            return end(p, END_DONE);
    }
    pump(p);
}

static void pump_on_body(struct mh_req *r)
{
    struct pump *p = pump_of(r);
    p->client_waiting = false;
    pump(p);
}

static void pump_on_writable(struct mh_req *r)
{
    struct pump *p = pump_of(r);
    if (r->closed || r->res.body.bytes + r->ops->pending(r) <= MH_REQ_LOW_WATER) {
        p->paused = false;
        pump(p);
    }
}

static void pump_on_abort(struct mh_req *r)
{
    struct pump *p = pump_of(r);
    const struct mh_handler *inner = p->inner;
    if (p->down) {
        end(p, END_CLIENT);
    } else {
        p->detail = "connection closed";
        end(p, "body");
    }
    if (inner->ops->on_abort)
        inner->ops->on_abort(r);
}

static const struct mh_handler_ops pump_ops = {
    .name = "proxy body",
    .on_body = pump_on_body,
    .on_writable = pump_on_writable,
    .on_abort = pump_on_abort,
};

const struct mh_handler *mh_lua_proxy_body_inner(const struct mh_req *r)
{
    if (!r->handler || r->handler->ops != &pump_ops)
        return NULL;
    return pump_of(r)->inner;
}

/* ---- the Lua side ------------------------------------------------------------------ */

static void pump_free(struct pump *p)
{
    if (!p->why)
        detach(p);
    mh_buf_free(&p->piece);
    free(p);
}

static int push_end(lua_State *L, struct pump *p)
{
    const char *why = p->why;
    int n = 1;
    if (why == END_DONE || why == END_CLIENT) {
        lua_pushboolean(L, 1);
    } else if (why == END_EARLY) {
        lua_pushboolean(L, 0);
    } else {
        lua_pushnil(L);
        lua_pushstring(L, p->upstream_err ? mh_client_err_kind(why) : why);
        lua_pushstring(L, p->detail ? p->detail : why);
        n = 3;
    }
    pump_free(p);
    return n;
}

static int resume_pump(struct mh_task *t, lua_State *co)
{
    return push_end(co, t->wait_data);
}

/* The task ends or a graceful stop comes first: the pump lets go; the response stays usable. */
static void cancel_pump(struct mh_task *t)
{
    struct pump *p = t->wait_data;
    pump_free(p);
}

static int run(lua_State *L, struct mh_task *t, struct pump *p)
{
    p->handler.ops = &pump_ops;
    p->inner = p->r->handler;
    p->r->handler = &p->handler;
    p->q_cb = p->q->on_event;
    p->q_ud = p->q->ud;
    p->q->on_event = on_exchange;
    p->q->ud = p;
    pump(p);
    if (p->why)
        return push_end(L, p);
    p->t = t;
    return mh_task_wait(L, t, resume_pump, cancel_pump, p);
}

/*
 * The request behind the running handler's own req or res at idx, or NULL
 * for anything else (moonhttp.cache's stand-ins, another task's): proxy.lua
 * moves those bodies itself.
 */
static struct mh_req *own_request(lua_State *L, struct mh_task *t, int idx)
{
    void *u = lua_touserdata(L, idx);
    if (!t->request || !u || (u != (void *)t->req && u != (void *)t->res))
        return NULL;
    return t->request;
}

static int stand_in(lua_State *L)
{
    lua_pushnil(L);
    lua_pushliteral(L, "stand-in");
    return 2;
}

static struct pump *new_pump(lua_State *L, struct mh_req *r, struct mh_client_req *q)
{
    struct pump *p = calloc(1, sizeof *p);
    if (!p)
        luaL_error(L, "out of memory");
    p->r = r;
    p->q = q;
    return p;
}

/* core.proxy_upload(resp, req, length|true): see the top of the file. */
static int l_proxy_upload(lua_State *L)
{
    struct mh_task *t = mh_task_check(L, "http.proxy");
    struct mh_client_req *q = mh_lua_client_pump(L, 1);
    struct mh_req *r = own_request(L, t, 2);
    if (!r)
        return stand_in(L);
    lua_Integer length = lua_isinteger(L, 3) ? lua_tointeger(L, 3) : -1;
    if (!q->stream)
        return luaL_error(L, "http.proxy: not a streamed request");
    struct pump *p = new_pump(L, r, q);
    p->length = length;
    return run(L, t, p);
}

/* core.proxy_relay(res, resp, req): see the top of the file. */
static int l_proxy_relay(lua_State *L)
{
    struct mh_task *t = mh_task_check(L, "http.proxy");
    struct mh_req *r = own_request(L, t, 1);
    struct mh_client_req *q = mh_lua_client_pump(L, 2);
    if (!r || r->closed)
        return r ? (lua_pushboolean(L, 1), 1) : stand_in(L);
    struct pump *p = new_pump(L, r, q);
    p->down = true;
    return run(L, t, p);
}

void mh_lua_proxy_body_open(lua_State *L)
{
    lua_pushcfunction(L, l_proxy_upload);
    lua_setfield(L, -2, "proxy_upload");
    lua_pushcfunction(L, l_proxy_relay);
    lua_setfield(L, -2, "proxy_relay");
}
