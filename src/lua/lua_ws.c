#include "lua_ws.h"

#include "codec.h"
#include "log.h"
#include "lua_sched.h"
#include "lua_opts.h"
#include "lua_type.h"
#include "lua_vm.h"
#include "req.h"
#include "utf8.h"
#include "ws.h"

#include <lauxlib.h>
#include <mbedtls/sha1.h>
#include <stdlib.h>
#include <string.h>

#define WS_MT "moonhttp.WebSocket"

/*
 * The `ws` userdata. The session (http/ws.c) belongs to the handler's task:
 * it ends when that task ends, however it ends, and the userdata then
 * answers nil, "closed". While the session lives the userdata is anchored
 * in the registry, so the session's callbacks never find it collected.
 *
 * Any task of the worker may send (a chat handler broadcasts to every
 * socket); only one at a time may receive.
 */
struct lws {
    struct mh_task_link owner; /* the handler's task */
    struct mh_ws *ws;          /* NULL once the session ended */
    int anchor;                /* registry ref of the userdata while the session lives */
    struct mh_task *receiver;  /* waiting in ws:receive */
    struct mh_task **senders;  /* waiting in ws:send for the output to drain */
    int nsenders, capsenders;
    struct mh_gen *gen; /* for the anchor's registry */
};

static void wake_senders(struct lws *u)
{
    int n = u->nsenders;
    u->nsenders = 0; /* each resume finds itself gone from the list */
    for (int i = 0; i < n; i++)
        mh_task_wake(u->senders[i]);
}

static void wake_receiver(struct lws *u)
{
    if (u->receiver) {
        struct mh_task *t = u->receiver;
        u->receiver = NULL;
        mh_task_wake(t);
    }
}

static void on_message(void *ud)
{
    wake_receiver(ud);
}

static void on_writable(void *ud)
{
    wake_senders(ud);
}

static const struct mh_ws_events lws_events = {.on_message = on_message,
                                               .on_writable = on_writable};

/* The handler's task ended: the session ends (a close frame with 1000 if it was still open). */
static void release_owner(struct mh_task_link *l)
{
    struct lws *u = (struct lws *)l;
    if (u->ws) {
        mh_ws_end(u->ws, 1000);
        u->ws = NULL;
    }
    wake_receiver(u);
    wake_senders(u);
    luaL_unref(u->gen->L, LUA_REGISTRYINDEX, u->anchor); /* collectable from here */
    u->anchor = LUA_NOREF;
}

static struct lws *check_ws(lua_State *L)
{
    return luaL_checkudata(L, 1, WS_MT);
}

static int push_closed(lua_State *L, const struct lws *u)
{
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    if (!u->ws)
        return 2;
    lua_pushinteger(L, u->ws->close_code ? u->ws->close_code : 1006);
    lua_pushlstring(L, u->ws->close_reason, u->ws->close_reason_len);
    return 4;
}

/* ---- receive ------------------------------------------------------------------ */

/* data, "text" | "binary"; nil, "closed", code, reason; or 0 when nothing is ready. */
static int push_received(lua_State *L, struct lws *u)
{
    if (!u->ws)
        return push_closed(L, u);
    const char *data;
    size_t len;
    bool binary;
    int rc = mh_ws_receive(u->ws, &data, &len, &binary);
    if (rc < 0)
        return push_closed(L, u);
    if (rc == 0)
        return 0;
    lua_pushlstring(L, data, len);
    if (binary)
        lua_pushliteral(L, "binary");
    else
        lua_pushliteral(L, "text");
    mh_ws_taken(u->ws);
    return 2;
}

static int resume_receive(struct mh_task *t, lua_State *co)
{
    struct lws *u = t->wait_data;
    int n = push_received(co, u);
    if (n == 0) /* woken without a message: only when the session ended under it */
        n = push_closed(co, u);
    return n;
}

static void cancel_receive(struct mh_task *t)
{
    struct lws *u = t->wait_data;
    if (u->receiver == t)
        u->receiver = NULL;
}

/* ws:receive() -> data, "text" | "binary"; or nil, "closed", code, reason */
static int l_receive(lua_State *L)
{
    struct lws *u = check_ws(L);
    struct mh_task *t = mh_task_check(L, "ws:receive");
    if (u->receiver)
        return luaL_error(L, "ws:receive: another task is already receiving on this WebSocket");
    int n = push_received(L, u);
    if (n)
        return n;
    u->receiver = t;
    return mh_task_wait(L, t, resume_receive, cancel_receive, u);
}

/* ---- send ----------------------------------------------------------------------- */

static void remove_sender(struct lws *u, struct mh_task *t)
{
    for (int i = 0; i < u->nsenders; i++)
        if (u->senders[i] == t) {
            u->senders[i] = u->senders[--u->nsenders];
            return;
        }
}

static int resume_sent(struct mh_task *t, lua_State *co)
{
    struct lws *u = t->wait_data;
    remove_sender(u, t);
    if (!u->ws || u->ws->state != MH_WS_OPEN || !u->ws->r || u->ws->r->closed)
        return push_closed(co, u);
    lua_pushboolean(co, 1);
    return 1;
}

static void cancel_sent(struct mh_task *t)
{
    remove_sender(t->wait_data, t);
}

static int send_frame(lua_State *L, struct lws *u, int opcode, const char *p, size_t len)
{
    if (!u->ws)
        return push_closed(L, u);
    const char *err = mh_ws_send(u->ws, opcode, p, len);
    if (err == mh_req_err_nomem)
        return luaL_error(L, "ws:send: out of memory");
    if (err)
        return push_closed(L, u);
    struct mh_task *t;
    if (mh_ws_output_high(u->ws) && (t = mh_task_current(L))) {
        /* Back-pressure: wait until the client has taken most of it. */
        if (u->nsenders == u->capsenders) {
            int ncap = u->capsenders ? u->capsenders * 2 : 4;
            struct mh_task **v = realloc(u->senders, (size_t)ncap * sizeof *v);
            if (!v)
                return luaL_error(L, "ws:send: out of memory");
            u->senders = v;
            u->capsenders = ncap;
        }
        u->senders[u->nsenders++] = t;
        return mh_task_wait(L, t, resume_sent, cancel_sent, u);
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* ws:send(data [, "text" | "binary"]) -> true; or nil, "closed" */
static int l_send(lua_State *L)
{
    struct lws *u = check_ws(L);
    size_t len;
    const char *p = luaL_checklstring(L, 2, &len);
    static const char *const kinds[] = {"text", "binary", NULL};
    int kind = luaL_checkoption(L, 3, "text", kinds);
    if (kind == 0) {
        unsigned st = 0;
        if (!mh_utf8_feed(&st, (const unsigned char *)p, len) || !mh_utf8_complete(st))
            return luaL_error(L, "ws:send: text must be valid UTF-8 (send it as \"binary\")");
    }
    return send_frame(L, u, kind == 0 ? MH_WS_TEXT : MH_WS_BINARY, p, len);
}

/* ws:ping([data]) -> true; or nil, "closed". The pong is answered by the client. */
static int l_ping(lua_State *L)
{
    struct lws *u = check_ws(L);
    size_t len = 0;
    const char *p = luaL_optlstring(L, 2, "", &len);
    luaL_argcheck(L, len <= 125, 2, "a ping carries at most 125 bytes");
    return send_frame(L, u, MH_WS_PING, p, len);
}

/*
 * ws:on_drain(fn): fn(ws) runs in a light thread of its own when a reload
 * retires this WebSocket's code with a drain window (drain_timeout), so the
 * app can ask its client to reconnect; nil removes it. Set after the
 * drain began, it runs at once.
 */
static int l_on_drain(lua_State *L);

/* ws:draining() -> whether a reload retired the code serving this WebSocket (it drains). */
static int l_draining(lua_State *L)
{
    struct lws *u = check_ws(L);
    lua_pushboolean(L, u->gen && mh_gen_draining(u->gen));
    return 1;
}

/* ws:close([code [, reason]]) -> true: starts the closing handshake (receive then ends). */
static int l_close(lua_State *L)
{
    struct lws *u = check_ws(L);
    lua_Integer code = luaL_optinteger(L, 2, 1000);
    size_t len = 0;
    const char *reason = luaL_optlstring(L, 3, "", &len);
    luaL_argcheck(L,
                  code == 1000 || code == 1001 || code == 1008 || code == 1011 ||
                      (code >= 3000 && code <= 4999),
                  2, "close code must be 1000, 1001, 1008, 1011 or 3000..4999");
    luaL_argcheck(L, len <= 123, 3, "a close reason is at most 123 bytes");
    unsigned st = 0;
    luaL_argcheck(L, mh_utf8_feed(&st, (const unsigned char *)reason, len) && mh_utf8_complete(st),
                  3, "a close reason must be UTF-8");
    if (u->ws)
        mh_ws_close(u->ws, (uint16_t)code, reason, len);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_index(lua_State *L)
{
    struct lws *u = check_ws(L);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "protocol") == 0) {
        lua_getiuservalue(L, 1, 1);
        return 1;
    }
    if (strcmp(k, "state") == 0) {
        static const char *const names[] = {"open", "closing", "closed"};
        lua_pushstring(L, u->ws && u->ws->r && !u->ws->r->closed ? names[u->ws->state] : "closed");
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}

static int l_tostring(lua_State *L)
{
    struct lws *u = check_ws(L);
    lua_pushfstring(L, "moonhttp.WebSocket (%s)", u->ws ? "open" : "closed");
    return 1;
}

/* ---- the upgrade ------------------------------------------------------------------ */

/* Defaults of req:websocket's options (README, WebSocket). */
static const struct mh_ws_config DEFAULTS = {
    .max_message = 1024 * 1024,
    .ping_interval = 30,
    .idle_timeout = 60,
    .close_timeout = 5,
};

/*
 * req:websocket([{ protocols =, max_message =, max_frame =, ping_interval =,
 * idle_timeout =, close_timeout = }]) -> ws; or nil, err with the error
 * answer (400, 426) staged, so a handler that just returns sends it. In C,
 * not Lua: a Lua frame between the handler and this call would double the
 * waiting coroutine's stack (about 0.8 KiB more per idle socket).
 */
int mh_lua_ws_start(lua_State *L, struct mh_req *r)
{
    struct mh_task *t = mh_task_check(L, "req:websocket");
    if (t->request != r)
        return luaL_error(L, "req:websocket: only the request's own handler may switch it");
    if (lua_isnoneornil(L, 2)) {
        lua_settop(L, 1);
        lua_newtable(L);
    }
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char *const known[] = {
        "protocols",    "max_message",   "max_frame", "ping_interval",
        "idle_timeout", "close_timeout", NULL};
    mh_lua_check_opts(L, 2, "req:websocket", known, 1);
    struct mh_ws_config cfg;
    const char *what = "req:websocket";
    cfg.max_message =
        (uint64_t)mh_lua_opt_size(L, 2, what, "max_message", (double)DEFAULTS.max_message, 1, 1);
    cfg.max_frame =
        (uint64_t)mh_lua_opt_size(L, 2, what, "max_frame", (double)cfg.max_message, 1, 1);
    cfg.ping_interval = mh_lua_opt_seconds(L, 2, what, "ping_interval", DEFAULTS.ping_interval, 1);
    cfg.idle_timeout = mh_lua_opt_seconds(L, 2, what, "idle_timeout", DEFAULTS.idle_timeout, 1);
    cfg.close_timeout = mh_lua_opt_seconds(L, 2, what, "close_timeout", DEFAULTS.close_timeout, 1);
    int ptype = lua_getfield(L, 2, "protocols");
    if (ptype != LUA_TNIL && ptype != LUA_TTABLE)
        return luaL_error(L, "req:websocket: protocols must be a list of strings");
    int protocols = lua_gettop(L);
    struct mh_ws_handshake hs;
    int status;
    const char *err = mh_ws_check(r, &hs, &status);
    if (err) {
        /* The handler may answer otherwise; if it just returns, this is the answer. */
        if (!r->res.head_sent) {
            mh_response_reset(&r->res);
            r->res.status = status;
            if (status == 426)
                mh_req_set_header(r, "Sec-WebSocket-Version", 21, "13", 2, true);
            mh_req_write(r, err, strlen(err));
            mh_req_write(r, "\n", 1);
        }
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    const char *protocol = NULL;
    size_t plen = 0;
    if (ptype == LUA_TTABLE) {
        for (lua_Integer i = 1; !protocol; i++) {
            if (lua_rawgeti(L, protocols, i) == LUA_TNIL)
                break;
            size_t len;
            const char *name = lua_tolstring(L, -1, &len);
            if (!name)
                return luaL_error(L, "req:websocket: protocols must be strings");
            if (mh_ws_offered(r, name, len)) {
                protocol = name; /* the protocols table on the stack keeps it alive */
                plen = len;
            }
            lua_pop(L, 1);
        }
    }
    if (r->res.head_sent || !r->ops->upgrade) {
        lua_pushnil(L);
        lua_pushstring(L, r->res.head_sent ? "the response has started"
                                           : "this protocol cannot switch to WebSocket");
        return 2;
    }
    struct lws *u = lua_newuserdatauv(L, sizeof *u, 2); /* 1: protocol, 2: on_drain */
    memset(u, 0, sizeof *u);
    u->anchor = LUA_NOREF;
    luaL_setmetatable(L, WS_MT);
    if (protocol)
        lua_pushlstring(L, protocol, plen);
    else
        lua_pushnil(L);
    lua_setiuservalue(L, -2, 1);
    u->ws = mh_ws_start(r, mh_gen_loop(t->gen), &cfg, &hs, protocol, plen, &lws_events, u);
    if (!u->ws) {
        lua_pushnil(L);
        lua_pushliteral(L, "cannot switch protocols");
        return 2;
    }
    u->gen = t->gen;
    lua_pushvalue(L, -1);
    u->anchor = luaL_ref(L, LUA_REGISTRYINDEX);
    u->owner.release = release_owner;
    mh_task_adopt(t, &u->owner);
    return 1;
}

/* Runs u's on_drain function (its user value 2), if any, in a light thread: fn(ws). */
static void run_on_drain(struct lws *u)
{
    lua_State *L = u->gen->L;
    if (u->anchor == LUA_NOREF || !lua_checkstack(L, 3))
        return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, u->anchor);
    if (lua_getiuservalue(L, -1, 2) != LUA_TFUNCTION) {
        lua_pop(L, 2);
        return;
    }
    lua_insert(L, -2); /* fn, ws */
    if (!mh_task_new(u->gen, L, 1, MH_TASK_THREAD)) {
        lua_pop(L, 2);
        mh_log(MH_LOG_ERROR, "ws:on_drain: out of memory starting the callback");
    }
}

static int l_on_drain(lua_State *L)
{
    struct lws *u = check_ws(L);
    if (!lua_isnil(L, 2))
        luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    lua_setiuservalue(L, 1, 2);
    if (u->ws && u->gen && mh_gen_draining(u->gen) && !lua_isnil(L, 2))
        run_on_drain(u);
    return 0;
}

static void drain_ws(struct mh_req *r, void *gen)
{
    struct mh_ws *ws = mh_ws_of(r);
    if (ws && r->owner == gen && ws->ud) {
        struct lws *u = ws->ud;
        if (u->ws == ws && u->gen == gen)
            run_on_drain(u);
    }
}

/* A reload retired g with a drain window: each of its WebSockets' on_drain runs. */
static void on_gen_stop(struct mh_gen *g, unsigned added)
{
    if ((added & MH_GEN_DRAINING) && !(g->stop & MH_GEN_STOPPING) && g->host &&
        g->host->each_request)
        g->host->each_request(g->host, drain_ws, g);
}

static int l_gc(lua_State *L)
{
    struct lws *u = lua_touserdata(L, 1);
    free(u->senders);
    u->senders = NULL;
    return 0;
}

void mh_lua_ws_open(lua_State *L)
{
    static const luaL_Reg methods[] = {{"receive", l_receive},
                                       {"send", l_send},
                                       {"ping", l_ping},
                                       {"close", l_close},
                                       {"on_drain", l_on_drain},
                                       {"draining", l_draining},
                                       {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__tostring", l_tostring}, {"__gc", l_gc}, {NULL, NULL}};
    mh_lua_register_type(L, &(struct mh_lua_type){
                                .name = WS_MT, .methods = methods, .index = l_index, .meta = meta});
    mh_gen_on_stop(mh_gen_of(L), on_gen_stop);
}

/* ---- for the client (lua/moonhttp/websocket.lua) ------------------------------------ */

/* core.ws_accept(key) -> the Sec-WebSocket-Accept a server must answer to `key` (4.2.2). */
static int l_ws_accept(lua_State *L)
{
    size_t klen;
    const char *key = luaL_checklstring(L, 1, &klen);
    luaL_argcheck(L, klen == 24, 1, "a Sec-WebSocket-Key is 24 characters");
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char in[24 + sizeof guid - 1], digest[20];
    memcpy(in, key, 24);
    memcpy(in + 24, guid, sizeof guid - 1);
    if (mbedtls_sha1(in, sizeof in, digest) != 0)
        return luaL_error(L, "core.ws_accept: sha1 failed");
    char out[29];
    mh_base64_encode(digest, sizeof digest, out, false);
    lua_pushlstring(L, out, 28);
    return 1;
}

/*
 * core.ws_mask(data, key) -> data XORed with the 4-byte key (5.3): what a
 * client does to every payload it sends, and undoing it. In C: a byte loop
 * in Lua costs about a microsecond per byte.
 */
static int l_ws_mask(lua_State *L)
{
    size_t n, klen;
    const char *p = luaL_checklstring(L, 1, &n);
    const char *key = luaL_checklstring(L, 2, &klen);
    luaL_argcheck(L, klen == 4, 2, "a masking key is 4 bytes");
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, n);
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(p[i] ^ key[i & 3]);
    luaL_pushresultsize(&b, n);
    return 1;
}

void mh_lua_ws_core_open(lua_State *L)
{
    lua_pushcfunction(L, l_ws_accept);
    lua_setfield(L, -2, "ws_accept");
    lua_pushcfunction(L, l_ws_mask);
    lua_setfield(L, -2, "ws_mask");
}
