/*
 * The Lua face of the outbound client: core.fetch, core.client and the
 * response userdata. A fetch yields the running task until the response
 * head (or an error) is there; resp:read / resp:body yield until body bytes
 * come. Runtime failures are `nil, err`; luaL_error is for misuse only.
 *
 * A response is closed exactly once: by resp:close(), `<close>`, __gc, or
 * the end of the task that opened it (a task link), whichever comes first. Its exchange state lives
 * inside the userdata, so a fetch allocates no C memory of its own; connections come from the pool.
 */
#include "lua_client.h"
#include "lua_fetch_head.h"

#include "client.h"
#include "lua_opts.h"
#include "lua_sched.h"
#include "lua_tls.h"
#include "lua_type.h"
#include "lua_vm.h"
#include "url.h"

#include <ctype.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLIENT_MT       "moonhttp.Client"
#define RESP_MT         "moonhttp.ClientResponse"
#define DEFAULT_TIMEOUT 30.0
#define READ_DEFAULT    16384

static const char DEFAULT_KEY = 'c'; /* registry: the generation's default client */

struct lclient {
    struct mh_client_pool *pool; /* NULL once closed */
};

enum wait_kind { WAIT_NONE, WAIT_HEAD, WAIT_READ, WAIT_BODY };

struct lresp {
    struct mh_client_req req;
    struct mh_task_link owner; /* on the task that opened it until closed */
    struct mh_task *waiter;
    int anchor; /* registry reference while a task waits on it */
    enum wait_kind wait;
    size_t want_n;
    bool closed;
    char *trailers; /* the trailers' pairs, kept when the body ended (the connection goes) */
    size_t trailers_len;
};

/* The error of a response closed under a task that waits on it. */
static const char err_resp_closed[] = "response closed";

/*
 * A failure as Lua sees it: nil, the kind callers compare ("timeout",
 * "refused", ...: client_err.h), and the detail for logs.
 */
static int push_err(lua_State *L, const char *err)
{
    lua_pushnil(L);
    lua_pushstring(L, err == err_resp_closed ? "closed" : mh_client_err_kind(err));
    lua_pushstring(L, err);
    return 3;
}

static struct ev_loop *loop_of_gen(lua_State *L)
{
    struct mh_gen *g = mh_gen_of(L);
    return mh_gen_loop(g);
}

/* ---- closing --------------------------------------------------------------- */

static void on_event(struct mh_client_req *req, enum mh_client_event ev);

static void resp_close(lua_State *L, struct lresp *r)
{
    free(r->trailers);
    r->trailers = NULL;
    r->trailers_len = 0;
    if (r->closed)
        return;
    r->closed = true;
    mh_task_unlink(&r->owner);
    mh_client_req_finish(&r->req);
    mh_client_pool_unref(r->req.pool);
    if (r->waiter) {
        /*
         * Another task is waiting on it (it was opened by a task that ended):
         * wake that task with an error rather than leave it hanging. Its
         * resume takes the anchor back.
         */
        if (!r->req.err)
            r->req.err = err_resp_closed;
        r->req.body_done = true;
        on_event(&r->req, MH_CLIENT_BODY);
    } else if (r->anchor != LUA_NOREF && L) {
        luaL_unref(L, LUA_REGISTRYINDEX, r->anchor);
        r->anchor = LUA_NOREF;
    }
}

/* The task that opened it ended: no Lua state may be touched for the anchor now. */
static void on_owner_end(struct mh_task_link *l)
{
    struct lresp *r = (struct lresp *)((char *)l - offsetof(struct lresp, owner));
    resp_close(NULL, r);
}

/* The waiting task ends first (killed): forget it, so the response does not wake it. */
static void cancel_wait(struct mh_task *t)
{
    struct lresp *r = t->wait_data;
    r->waiter = NULL;
    r->wait = WAIT_NONE;
    luaL_unref(t->co, LUA_REGISTRYINDEX, r->anchor);
    r->anchor = LUA_NOREF;
}

/* ---- waking the task -------------------------------------------------------- */

static void on_event(struct mh_client_req *req, enum mh_client_event ev)
{
    struct lresp *r = req->ud;
    (void)ev;
    if (r->waiter)
        mh_task_wake(r->waiter);
}

static int wait_on(lua_State *L, struct lresp *r, enum wait_kind kind, mh_task_resume_fn fn)
{
    struct mh_task *t = mh_task_check(L, "http.fetch");
    lua_pushvalue(L, 1);
    r->anchor = luaL_ref(L, LUA_REGISTRYINDEX);
    r->waiter = t;
    r->wait = kind;
    return mh_task_wait(L, t, fn, cancel_wait, r);
}

/* Takes the waiting response back from the task; leaves the userdata pushed on co. */
static struct lresp *unwait(struct mh_task *t, lua_State *co)
{
    struct lresp *r = t->wait_data;
    r->waiter = NULL;
    r->wait = WAIT_NONE;
    lua_rawgeti(co, LUA_REGISTRYINDEX, r->anchor);
    luaL_unref(co, LUA_REGISTRYINDEX, r->anchor);
    r->anchor = LUA_NOREF;
    return r;
}

/* ---- reading ----------------------------------------------------------------- */

/* Pushes what read(n)/body() can answer now; returns results, or -1 to wait. */
/* The body ended: its trailers are copied out before the connection is let go. */
static void finish_body(struct lresp *r)
{
    size_t len;
    const char *t = mh_client_trailers(&r->req, &len);
    if (len && !r->trailers && (r->trailers = malloc(len))) {
        memcpy(r->trailers, t, len);
        r->trailers_len = len;
    }
    mh_client_req_finish(&r->req);
}

static int read_now(lua_State *L, struct lresp *r, size_t n, bool all)
{
    size_t len;
    const char *p = mh_client_body(&r->req, &len);
    if (r->req.err)
        return push_err(L, r->req.err);
    if (all) {
        if (!r->req.body_done)
            return -1;
        lua_pushlstring(L, p, len);
        mh_client_body_consume(&r->req, len);
        finish_body(r); /* read to the end: the connection is free now */
        return 1;
    }
    if (len > 0) {
        if (len > n)
            len = n;
        lua_pushlstring(L, p, len);
        mh_client_body_consume(&r->req, len);
        return 1;
    }
    if (r->req.body_done || !r->req.conn) {
        finish_body(r);
        lua_pushnil(L); /* end of body */
        return 1;
    }
    return -1;
}

static int resume_read(struct mh_task *t, lua_State *co)
{
    struct lresp *r = unwait(t, co);
    lua_pop(co, 1);
    bool all = r->want_n == 0;
    int n = read_now(co, r, r->want_n, all);
    if (n < 0) {
        /* Woken without an answer (cannot happen by contract): report, never hang. */
        lua_pushnil(co);
        lua_pushliteral(co, "internal error: woken without data");
        n = 2;
    }
    return n;
}

static struct lresp *check_open_resp(lua_State *L)
{
    struct lresp *r = luaL_checkudata(L, 1, RESP_MT);
    if (r->closed)
        luaL_error(L, "response is closed");
    if (r->waiter)
        luaL_error(L, "response is already being read by another task");
    return r;
}

static int do_read(lua_State *L, struct lresp *r, size_t n)
{
    bool all = n == 0;
    int got = read_now(L, r, n ? n : SIZE_MAX, all);
    if (got >= 0)
        return got;
    if (!mh_client_body_want(&r->req, all)) {
        got = read_now(L, r, n ? n : SIZE_MAX, all);
        if (got >= 0)
            return got;
        lua_pushnil(L);
        lua_pushliteral(L, "internal error: no data and nothing to wait for");
        return 2;
    }
    r->want_n = n;
    return wait_on(L, r, all ? WAIT_BODY : WAIT_READ, resume_read);
}

/* resp:read([n]) → up to n bytes (default 16 KiB), nil at the end, or nil, err. */
static int l_resp_read(lua_State *L)
{
    struct lresp *r = check_open_resp(L);
    lua_Integer n = luaL_optinteger(L, 2, READ_DEFAULT);
    luaL_argcheck(L, n > 0, 2, "must be positive");
    return do_read(L, r, (size_t)n);
}

/* resp:body() → the rest of the body, or nil, err. */
static int l_resp_body(lua_State *L)
{
    struct lresp *r = check_open_resp(L);
    return do_read(L, r, 0);
}

static int l_resp_close(lua_State *L)
{
    struct lresp *r = luaL_checkudata(L, 1, RESP_MT);
    resp_close(L, r);
    return 0;
}

/* ---- head --------------------------------------------------------------------- */

/*
 * Keeps the head's "name\0value\0" pairs as uservalue 2 of the response at
 * idx: one string, which outlives the connection. The headers table is made
 * from it on the first resp:header() or resp.headers (headers_table), so a
 * caller that reads header_list() or nothing at all (http.proxy) never pays
 * for a table per name.
 */
static void store_headers(lua_State *L, int idx, struct lresp *r)
{
    size_t len;
    const char *p = mh_client_head(&r->req, &len);
    lua_pushlstring(L, p, len);
    lua_setiuservalue(L, idx < 0 ? idx - 1 : idx, 2);
}

/* Pushes the headers table (lowercase name → list of values) of the response at 1. */
static void headers_table(lua_State *L)
{
    if (lua_getiuservalue(L, 1, 2) != LUA_TSTRING) {
        if (!lua_istable(L, -1)) {
            lua_pop(L, 1);
            lua_newtable(L);
        }
        return;
    }
    size_t len;
    const char *p = lua_tolstring(L, -1, &len), *end = p + len; /* anchored below the table */
    lua_newtable(L);
    luaL_Buffer b;
    while (p < end) {
        const char *name = p;
        size_t nlen = strnlen(name, (size_t)(end - p));
        const char *value = name + nlen + 1;
        if (value >= end)
            break;
        size_t vlen = strnlen(value, (size_t)(end - value));
        p = value + vlen + 1;
        char *lower = luaL_buffinitsize(L, &b, nlen);
        for (size_t i = 0; i < nlen; i++)
            lower[i] = (char)tolower((unsigned char)name[i]);
        luaL_pushresultsize(&b, nlen);
        lua_pushvalue(L, -1);
        if (lua_rawget(L, -3) == LUA_TNIL) {
            lua_pop(L, 1);
            lua_createtable(L, 1, 0);
            lua_pushvalue(L, -2);
            lua_pushvalue(L, -2);
            lua_rawset(L, -5);
        }
        lua_pushlstring(L, value, vlen);
        lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
        lua_pop(L, 2);
    }
    lua_remove(L, -2); /* the bytes */
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, 1, 2);
}

static int resume_fetch(struct mh_task *t, lua_State *co)
{
    struct lresp *r = unwait(t, co);
    if (r->req.err) {
        const char *err = r->req.err;
        lua_pop(co, 1);
        resp_close(co, r);
        return push_err(co, err);
    }
    store_headers(co, -1, r);
    return 1;
}

static int l_resp_header(lua_State *L)
{
    luaL_checkudata(L, 1, RESP_MT);
    size_t n;
    const char *name = luaL_checklstring(L, 2, &n);
    luaL_Buffer b;
    char *lower = luaL_buffinitsize(L, &b, n);
    for (size_t i = 0; i < n; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    luaL_pushresultsize(&b, n);
    headers_table(L);
    lua_pushvalue(L, -2);
    if (lua_rawget(L, -2) != LUA_TTABLE) {
        lua_pushnil(L);
        return 1;
    }
    lua_rawgeti(L, -1, 1);
    return 1;
}

/*
 * resp:header_list() → { name1, value1, name2, value2, ... }: the head in
 * order, names as the server wrote them (for a proxy that keeps their case).
 */
/*
 * Pushes { name1, value1, ... } from fields stored as NUL-terminated name,
 * value pairs in p[0..len) (the client's head and trailer layout).
 */
static int push_field_list(lua_State *L, const char *p, size_t len)
{
    const char *end = p + len;
    lua_newtable(L);
    lua_Integer n = 0;
    while (p < end) {
        size_t nlen = strnlen(p, (size_t)(end - p));
        const char *value = p + nlen + 1;
        if (value >= end)
            break;
        size_t vlen = strnlen(value, (size_t)(end - value));
        lua_pushlstring(L, p, nlen);
        lua_rawseti(L, -2, ++n);
        lua_pushlstring(L, value, vlen);
        lua_rawseti(L, -2, ++n);
        p = value + vlen + 1;
    }
    return 1;
}

static int l_resp_header_list(lua_State *L)
{
    struct lresp *r = luaL_checkudata(L, 1, RESP_MT);
    size_t len = 0;
    const char *p = r->closed ? "" : mh_client_head(&r->req, &len);
    return push_field_list(L, p, r->closed ? 0 : len);
}

/*
 * resp:trailers() → { name1, value1, ... }: the trailer fields of a chunked
 * response, names as sent, once the body has been read to its end (empty
 * before, and when there are none).
 */
static int l_resp_trailers(lua_State *L)
{
    struct lresp *r = luaL_checkudata(L, 1, RESP_MT);
    return push_field_list(L, r->trailers ? r->trailers : "", r->trailers ? r->trailers_len : 0);
}

/* core.fetch_trailers(resp) → resp:trailers(), or nil when there are none (no table for
 * http.proxy). */
static int l_fetch_trailers(lua_State *L)
{
    struct lresp *r = luaL_checkudata(L, 1, RESP_MT);
    if (!r->trailers_len) {
        lua_pushnil(L);
        return 1;
    }
    return push_field_list(L, r->trailers, r->trailers_len);
}

static int l_resp_headers(lua_State *L)
{
    luaL_checkudata(L, 1, RESP_MT);
    lua_settop(L, 1);
    headers_table(L);
    return 1;
}

static int l_resp_index(lua_State *L)
{
    struct lresp *r = luaL_checkudata(L, 1, RESP_MT);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "status") == 0) {
        lua_pushinteger(L, r->req.status);
        return 1;
    }
    if (strcmp(k, "complete") == 0) { /* the whole body has arrived (it may be unread) */
        lua_pushboolean(L, r->req.body_done && !r->req.err);
        return 1;
    }
    if (strcmp(k, "proto") == 0) {
        lua_pushfstring(L, "HTTP/%d.%d", r->req.http_major, r->req.http_minor);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}

const struct mh_client_req *mh_lua_client_exchange(lua_State *L, int idx)
{
    struct lresp *r = luaL_checkudata(L, idx, RESP_MT);
    return r->closed ? NULL : &r->req;
}

struct mh_client_req *mh_lua_client_pump(lua_State *L, int idx)
{
    struct lresp *r = luaL_checkudata(L, idx, RESP_MT);
    if (r->closed)
        luaL_error(L, "response is closed");
    if (r->waiter)
        luaL_error(L, "response is already being read by another task");
    return &r->req;
}

static int l_resp_tostring(lua_State *L)
{
    struct lresp *r = luaL_checkudata(L, 1, RESP_MT);
    lua_pushfstring(L, "moonhttp.ClientResponse (%d%s)", r->req.status,
                    r->closed ? ", closed" : "");
    return 1;
}

/* ---- fetch --------------------------------------------------------------------- */

static struct mh_client_pool *default_pool(lua_State *L);

/* What start_fetch needs besides the request string. */
struct fetch_params {
    const char *method; /* anchored by the caller's arguments */
    size_t mlen;
    lua_Integer stream;
    double timeout, connect_timeout, send_timeout, read_timeout;
};

/*
 * Starts the exchange of the request string on top of the stack (kept as the
 * response's user value 1) and waits for its head; a streamed one returns the
 * response at once. The stack is left with only the response.
 */
static int start_fetch(lua_State *L, struct mh_client_pool *pool, const struct mh_url *u,
                       const struct fetch_params *p)
{
    const char *method = p->method;
    size_t mlen = p->mlen;
    /* user values: 1 the request, 2 the headers table, 3 the streamed piece being written */
    struct lresp *r = lua_newuserdatauv(L, sizeof *r, 3);
    memset(r, 0, sizeof *r);
    r->anchor = LUA_NOREF;
    r->closed = true; /* until the exchange is set up: __gc has nothing to do */
    luaL_setmetatable(L, RESP_MT);
    lua_pushvalue(L, -2);
    lua_setiuservalue(L, -2, 1);
    lua_replace(L, 1); /* the response is the `self` that wait_on anchors */
    lua_settop(L, 1);

    struct mh_task *t = mh_task_current(L);
    struct mh_client_req *q = &r->req;
    q->pool = pool;
    mh_client_pool_ref(pool);
    q->tls = u->tls;
    memcpy(q->host, u->host, sizeof q->host);
    q->port = (uint16_t)u->port;
    lua_getiuservalue(L, 1, 1);
    q->data = lua_tolstring(L, -1, &q->len);
    lua_pop(L, 1);
    q->is_head = mlen == 4 && memcmp(method, "HEAD", 4) == 0;
    q->stream = p->stream != MH_FETCH_STREAM_NONE;
    q->idempotent =
        !q->stream &&
        (q->is_head ||
         (mlen == 3 && (memcmp(method, "GET", 3) == 0 || memcmp(method, "PUT", 3) == 0)) ||
         (mlen == 6 && memcmp(method, "DELETE", 6) == 0) ||
         (mlen == 7 && memcmp(method, "OPTIONS", 7) == 0));
    q->timeout = p->timeout;
    q->connect_timeout = p->connect_timeout;
    q->send_timeout = p->send_timeout;
    q->read_timeout = p->read_timeout;
    q->on_event = on_event;
    q->ud = r;
    r->closed = false;
    r->owner.release = on_owner_end;
    mh_task_adopt(t, &r->owner);
    /* Anchor and register the wait first: a failure may be reported from inside start. */
    lua_pushvalue(L, 1);
    r->anchor = luaL_ref(L, LUA_REGISTRYINDEX);
    r->waiter = t;
    r->wait = WAIT_HEAD;
    t->wait_data = r; /* set before start: a failure may be reported from inside it */
    mh_client_start(q);
    if (q->stream) {
        /* The caller sends the body (core.fetch_send), then waits for the head (fetch_head). */
        r->waiter = NULL;
        r->wait = WAIT_NONE;
        luaL_unref(L, LUA_REGISTRYINDEX, r->anchor);
        r->anchor = LUA_NOREF;
        return 1;
    }
    return mh_task_wait(L, t, resume_fetch, cancel_wait, r);
}

/* The argument at idx as a streamed body's framing: nil (none), a length, or true (chunked). */
static lua_Integer check_stream(lua_State *L, int idx)
{
    if (lua_isboolean(L, idx) && lua_toboolean(L, idx))
        return MH_FETCH_STREAM_CHUNKED;
    if (lua_isinteger(L, idx) && lua_tointeger(L, idx) >= 0)
        return lua_tointeger(L, idx);
    if (!lua_isnoneornil(L, idx))
        luaL_argerror(L, idx, "a length or true");
    return MH_FETCH_STREAM_NONE;
}

/* nil, "url", why: a URL mh_url_parse refused. */
static int push_url_err(lua_State *L, const char *why)
{
    lua_pushnil(L);
    lua_pushliteral(L, "url");
    lua_pushstring(L, why);
    return 3;
}

/* The pool of the client at idx, or the default client's for nil. Raises once it is closed. */
static struct mh_client_pool *client_pool(lua_State *L, int idx)
{
    if (lua_isnoneornil(L, idx))
        return default_pool(L);
    struct lclient *c = luaL_checkudata(L, idx, CLIENT_MT);
    if (!c->pool)
        luaL_error(L, "client is closed");
    return c->pool;
}

/* core.fetch(client|nil, url [, opts]) → resp | nil, err. Yields the task. */
static int l_fetch(lua_State *L)
{
    struct mh_client_pool *pool = client_pool(L, 1);
    size_t ulen;
    const char *url = luaL_checklstring(L, 2, &ulen);
    int opts = lua_istable(L, 3) ? 3 : 0;
    if (!opts && !lua_isnoneornil(L, 3))
        luaL_typeerror(L, 3, "table");
    /* redirects is read by moonhttp's Lua fetch, which http.fetch and client:fetch tail-call: the
     * user is 2 up. */
    static const char *const known[] = {"method",       "headers",         "body",
                                        "timeout",      "connect_timeout", "send_timeout",
                                        "read_timeout", "redirects",       NULL};
    if (opts)
        mh_lua_check_opts(L, opts, "http.fetch", known, 2);
    /* 4: a streamed body's length, true for chunked (moonhttp's Lua fetch streams it) */
    lua_Integer stream = check_stream(L, 4);
    lua_settop(L, 3);
    mh_task_check(L, "http.fetch");
    struct mh_url u;
    const char *err = mh_url_parse(url, ulen, &u);
    if (err)
        return push_url_err(L, err);
    struct fetch_params p = {.method = "GET", .mlen = 3, .stream = stream};
    p.timeout = mh_lua_opt_seconds(L, opts, "http.fetch", "timeout", DEFAULT_TIMEOUT, 2);
    p.connect_timeout = mh_lua_opt_seconds(L, opts, "http.fetch", "connect_timeout", 0, 2);
    p.send_timeout = mh_lua_opt_seconds(L, opts, "http.fetch", "send_timeout", 0, 2);
    p.read_timeout = mh_lua_opt_seconds(L, opts, "http.fetch", "read_timeout", 0, 2);
    if (opts) {
        lua_getfield(L, opts, "method");
        if (!lua_isnil(L, -1)) {
            p.method = luaL_checklstring(L, -1, &p.mlen); /* anchored in opts */
            if (!mh_lua_fetch_is_token(p.method, p.mlen))
                return luaL_error(L, "http.fetch: bad method");
        }
        lua_pop(L, 1);
    }
    mh_lua_fetch_request(L, opts, &u, p.method, p.mlen, stream); /* the request string at 4 */
    return start_fetch(L, pool, &u, &p);
}

/*
 * core.proxy_fetch(client|nil, url, head, method, stream, opts|nil [, host]):
 * http.proxy's exchange. The head is core.proxy_request's (request line,
 * fields and framing; with host, its Host is the url's authority, written
 * here after the request line); url gives the connection (scheme, host, port); stream
 * is nil, a length or true as for core.fetch's argument 4; the timeouts are
 * http.proxy's options (timeout none and read_timeout 60 s by default). As
 * core.fetch otherwise: yields until the head, or returns the response at
 * once for a streamed body (core.fetch_send, then core.fetch_head).
 */
static int l_proxy_fetch(lua_State *L)
{
    struct mh_client_pool *pool = client_pool(L, 1);
    size_t ulen;
    const char *url = luaL_checklstring(L, 2, &ulen);
    luaL_checktype(L, 3, LUA_TSTRING);
    struct fetch_params p = {.stream = MH_FETCH_STREAM_NONE};
    p.method = luaL_checklstring(L, 4, &p.mlen); /* a request's method: a token */
    p.stream = check_stream(L, 5);
    int opts = lua_isnil(L, 6) ? 0 : 6; /* nil: http.proxy without options */
    if (opts)
        luaL_checktype(L, 6, LUA_TTABLE);
    p.timeout = mh_lua_opt_seconds(L, opts, "http.proxy", "timeout", 0, 1);
    p.connect_timeout = mh_lua_opt_seconds(L, opts, "http.proxy", "connect_timeout", 0, 1);
    p.send_timeout = mh_lua_opt_seconds(L, opts, "http.proxy", "send_timeout", 0, 1);
    p.read_timeout = mh_lua_opt_seconds(L, opts, "http.proxy", "read_timeout", 60, 1);
    mh_task_check(L, "http.fetch");
    struct mh_url u;
    const char *err = mh_url_parse(url, ulen, &u);
    if (err)
        return push_url_err(L, err);
    if (!lua_toboolean(L, 7)) {
        lua_pushvalue(L, 3);
        return start_fetch(L, pool, &u, &p);
    }
    /* the head of a group's request, built once: this server's Host after its request line */
    size_t hlen;
    const char *head = lua_tolstring(L, 3, &hlen);
    const char *eol = memchr(head, '\n', hlen);
    size_t line = eol ? (size_t)(eol - head) + 1 : hlen;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, head, line);
    luaL_addlstring(&b, "Host: ", 6);
    luaL_addlstring(&b, u.authority, u.authority_len);
    luaL_addlstring(&b, "\r\n", 2);
    luaL_addlstring(&b, head + line, hlen - line);
    luaL_pushresult(&b);
    return start_fetch(L, pool, &u, &p);
}

/* ---- streamed request bodies ------------------------------------------------------ */

static int resume_send(struct mh_task *t, lua_State *co)
{
    struct lresp *r = unwait(t, co);
    lua_pushnil(co);
    lua_setiuservalue(co, -2, 3); /* the piece is written: let it go */
    lua_pop(co, 1);
    if (r->req.err)
        return push_err(co, r->req.err);
    lua_pushboolean(co, !r->req.early);
    return 1;
}

/*
 * core.fetch_send(resp, bytes, last) → true, false (the server answered
 * early: stop sending, fetch_head has its response), or nil, kind, detail.
 * Waits until the piece (framed by the caller) is written to the socket:
 * one piece in flight is the back-pressure.
 */
static int l_fetch_send(lua_State *L)
{
    struct lresp *r = check_open_resp(L);
    size_t len;
    const char *p = luaL_checklstring(L, 2, &len);
    bool last = lua_toboolean(L, 3);
    if (!r->req.stream)
        return luaL_error(L, "fetch_send: not a streamed request");
    lua_settop(L, 2);
    lua_setiuservalue(L, 1, 3); /* keeps the piece alive while it is written */
    if (!mh_client_send(&r->req, p, len, last)) {
        lua_pushnil(L);
        lua_setiuservalue(L, 1, 3);
        if (r->req.err)
            return push_err(L, r->req.err);
        lua_pushboolean(L, !r->req.early);
        return 1;
    }
    return wait_on(L, r, WAIT_READ, resume_send);
}

/* core.fetch_head(resp) → resp (its head there), or nil, kind, detail. */
static int l_fetch_head(lua_State *L)
{
    struct lresp *r = check_open_resp(L);
    lua_settop(L, 1);
    if (!mh_client_head_want(&r->req)) {
        if (r->req.err) {
            const char *err = r->req.err;
            resp_close(L, r);
            return push_err(L, err);
        }
        store_headers(L, 1, r);
        return 1;
    }
    return wait_on(L, r, WAIT_HEAD, resume_fetch);
}

/* ---- clients ----------------------------------------------------------------------- */

static int new_client(lua_State *L, int opts)
{
    struct mh_client_settings s;
    mh_client_settings_init(&s);
    const char *ca = NULL, *cert = NULL, *key = NULL;
    if (opts) {
        const char *what = "http.client"; /* called by http.client: its caller is 2 up */
        s.max_idle = (size_t)mh_lua_opt_number(L, opts, what, "max_idle", (double)s.max_idle, 0, 2);
        s.max_idle_per_host = (size_t)mh_lua_opt_number(L, opts, what, "max_idle_per_host",
                                                        (double)s.max_idle_per_host, 0, 2);
        s.idle_timeout = mh_lua_opt_seconds(L, opts, what, "idle_timeout", s.idle_timeout, 2);
        s.drain_bytes =
            (size_t)mh_lua_opt_size(L, opts, what, "drain_bytes", (double)s.drain_bytes, 0, 2);
        s.drain_timeout = mh_lua_opt_seconds(L, opts, what, "drain_timeout", s.drain_timeout, 2);
        s.connect_timeout =
            mh_lua_opt_seconds(L, opts, what, "connect_timeout", s.connect_timeout, 2);
        s.tls_timeout = mh_lua_opt_seconds(L, opts, what, "tls_timeout", s.tls_timeout, 2);
        s.drain_wait = mh_lua_opt_seconds(L, opts, what, "drain_wait", s.drain_wait, 2);
        lua_getfield(L, opts, "tls");
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "ca");
            if (!lua_isnil(L, -1))
                ca = luaL_checkstring(L, -1); /* anchored by the opts table */
            lua_pop(L, 1);
            lua_getfield(L, -1, "verify");
            if (!lua_isnil(L, -1))
                s.tls_verify = lua_toboolean(L, -1);
            lua_pop(L, 1);
            lua_getfield(L, -1, "resume");
            if (!lua_isnil(L, -1))
                s.tls_resume = lua_toboolean(L, -1);
            lua_pop(L, 1);
            s.tls13_only = mh_lua_tls13_only(L, lua_gettop(L), "http.client");
            lua_getfield(L, -1, "cert");
            cert = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1); /* anchored by opts */
            lua_getfield(L, -2, "key");
            key = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
            if (!cert != !key)
                luaL_error(L, "http.client: tls.cert and tls.key go together");
            lua_pop(L, 2);
        } else if (!lua_isnil(L, -1)) {
            luaL_error(L, "http.client: tls must be a table");
        }
        lua_pop(L, 1);
    }
    struct lclient *c = lua_newuserdatauv(L, sizeof *c, 0);
    c->pool = NULL;
    luaL_setmetatable(L, CLIENT_MT);
    /* No Lua calls from here on: nothing may longjmp past the allocations. */
    if ((ca && !(s.tls_ca = strdup(ca))) || (cert && !(s.tls_cert = strdup(cert))) ||
        (key && !(s.tls_key = strdup(key)))) {
        free(s.tls_ca);
        free(s.tls_cert);
        return luaL_error(L, "out of memory");
    }
    c->pool = mh_client_pool_new(loop_of_gen(L), &s);
    if (!c->pool) {
        free(s.tls_ca);
        free(s.tls_cert);
        free(s.tls_key);
        return luaL_error(L, "out of memory");
    }
    return 1;
}

static struct mh_client_pool *default_pool(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &DEFAULT_KEY);
    struct lclient *c = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (c && c->pool)
        return c->pool;
    new_client(L, 0);
    c = lua_touserdata(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &DEFAULT_KEY);
    return c->pool;
}

/* core.client(opts) */
static int l_client(lua_State *L)
{
    int opts = 0;
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        opts = 1;
        /* Called by http.client, for the user: 2 frames up. */
        static const char *const known[] = {
            "max_idle",        "max_idle_per_host", "idle_timeout", "drain_bytes", "drain_timeout",
            "connect_timeout", "tls_timeout",       "drain_wait",   "tls",         NULL};
        static const char *const tls_known[] = {"ca",  "verify",      "resume", "cert",
                                                "key", "min_version", NULL};
        mh_lua_check_opts(L, 1, "http.client", known, 2);
        if (lua_getfield(L, 1, "tls") == LUA_TTABLE)
            mh_lua_check_opts(L, -1, "http.client: tls", tls_known, 2);
        lua_pop(L, 1);
    }
    return new_client(L, opts);
}

static int l_client_gc(lua_State *L)
{
    struct lclient *c = luaL_checkudata(L, 1, CLIENT_MT);
    if (c->pool) {
        mh_client_pool_unref(c->pool);
        c->pool = NULL;
    }
    return 0;
}

/* core.client_close(client): closes idle connections; the client stays usable. */
static int l_client_close(lua_State *L)
{
    struct lclient *c = luaL_checkudata(L, 1, CLIENT_MT);
    if (c->pool)
        mh_client_pool_close_idle(c->pool);
    return 0;
}

static void set_stat(lua_State *L, const char *k, unsigned long v)
{
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, k);
}

/* core.client_stats([client]) → table */
static int l_client_stats(lua_State *L)
{
    struct mh_client_pool *p;
    if (lua_isnoneornil(L, 1)) {
        p = default_pool(L);
    } else {
        struct lclient *c = luaL_checkudata(L, 1, CLIENT_MT);
        if (!c->pool)
            return luaL_error(L, "client is closed");
        p = c->pool;
    }
    size_t idle, open;
    const struct mh_client_stats *s = mh_client_pool_stats(p, &idle, &open);
    lua_createtable(L, 0, 12);
    set_stat(L, "dials", s->dials);
    set_stat(L, "reuses", s->reuses);
    set_stat(L, "retries", s->retries);
    set_stat(L, "drains_sync", s->drains_sync);
    set_stat(L, "drains_background", s->drains_done);
    set_stat(L, "drains_completed", s->drains_sync + s->drains_done);
    set_stat(L, "drains_abandoned", s->drains_abandoned);
    set_stat(L, "closed_unread", s->closes_no_drain);
    set_stat(L, "tls_resumed", s->tls_resumed);
    set_stat(L, "idle", idle);
    set_stat(L, "open", open);
    set_stat(L, "in_use", open - idle);
    return 1;
}

void mh_client_open(lua_State *L)
{
    static const luaL_Reg resp_methods[] = {
        {"read", l_resp_read},         {"body", l_resp_body},
        {"close", l_resp_close},       {"header", l_resp_header},
        {"headers", l_resp_headers},   {"header_list", l_resp_header_list},
        {"trailers", l_resp_trailers}, {NULL, NULL},
    };
    static const luaL_Reg resp_meta[] = {
        {"__gc", l_resp_close},
        {"__close", l_resp_close},
        {"__tostring", l_resp_tostring},
        {NULL, NULL},
    };
    static const luaL_Reg client_meta[] = {{"__gc", l_client_gc}, {NULL, NULL}};
    mh_lua_register_type(
        L, &(struct mh_lua_type){
               .name = RESP_MT, .methods = resp_methods, .index = l_resp_index, .meta = resp_meta});
    mh_lua_register_type(L, &(struct mh_lua_type){.name = CLIENT_MT, .meta = client_meta});
    static const luaL_Reg fns[] = {
        {"fetch", l_fetch},
        {"proxy_fetch", l_proxy_fetch},
        {"fetch_trailers", l_fetch_trailers},
        {"fetch_send", l_fetch_send},
        {"fetch_head", l_fetch_head},
        {"client", l_client},
        {"client_close", l_client_close},
        {"client_stats", l_client_stats},
        {NULL, NULL},
    };
    luaL_setfuncs(L, fns, 0);
}
