/*
 * core.relay(req, sock, status, headers, idle_timeout, max_buffer): the C
 * half of http.relay_upgrade (lua/moonhttp/relay.lua). The Lua half has
 * connected, sent the upstream request and read the upstream's 101; this
 * switches the client's stream (the 101, or RFC 8441's 200 on HTTP/2), then
 * hands both to the pump of http/relay.c and waits until it ends. No Lua
 * runs while bytes flow.
 */
#include "lua_relay.h"

#include "lua_sched.h"
#include "lua_socket_impl.h"
#include "lua_vm.h"
#include "relay.h"
#include "req.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

/* The waiting task's side of one relay. */
struct lrelay {
    struct mh_relay *x;
    struct mh_task *t; /* set once the task waits */
    const char *why;
};

static void on_done(void *ud, const char *why)
{
    struct lrelay *u = ud;
    u->why = why;
    if (u->t)
        mh_task_wake(u->t);
}

/* true, why, bytes up, bytes down */
static int push_done(lua_State *L, struct lrelay *u)
{
    size_t up, down;
    mh_relay_counts(u->x, &up, &down);
    lua_pushboolean(L, 1);
    lua_pushstring(L, u->why);
    lua_pushinteger(L, (lua_Integer)up);
    lua_pushinteger(L, (lua_Integer)down);
    mh_relay_free(u->x);
    free(u);
    return 4;
}

static int resume_relay(struct mh_task *t, lua_State *co)
{
    return push_done(co, t->wait_data);
}

/* The task ends (killed, stopping) while relaying: both directions stop; the caller closes. */
static void cancel_relay(struct mh_task *t)
{
    struct lrelay *u = t->wait_data;
    mh_relay_free(u->x);
    free(u);
}

/* Sets the switching answer's status and headers ({ name, value, ... }) on r. */
static void set_head(lua_State *L, struct mh_req *r, int status, int headers)
{
    r->res.status = status;
    lua_Integer n = luaL_len(L, headers);
    for (lua_Integer i = 1; i + 1 <= n; i += 2) {
        lua_rawgeti(L, headers, i);
        lua_rawgeti(L, headers, i + 1);
        size_t nlen, vlen;
        const char *name = lua_tolstring(L, -2, &nlen);
        const char *value = lua_tolstring(L, -1, &vlen);
        if (name && value)
            mh_req_set_header(r, name, nlen, value, vlen, false); /* a bad one is left out */
        lua_pop(L, 2);
    }
}

static int l_relay(lua_State *L)
{
    struct mh_task *t = mh_task_check(L, "http.relay_upgrade");
    struct mh_req *r = t->request;
    if (!r || lua_touserdata(L, 1) != (void *)t->req)
        return luaL_error(L, "http.relay_upgrade: only the request's own handler may relay it");
    struct lsock *k = luaL_checkudata(L, 2, "moonhttp.Socket");
    int status = (int)luaL_checkinteger(L, 3);
    luaL_checktype(L, 4, LUA_TTABLE);
    double idle = luaL_checknumber(L, 5);
    lua_Integer max_buffer = luaL_checkinteger(L, 6);
    luaL_argcheck(L, max_buffer > 0, 6, "max_buffer must be > 0");
    if (!k->s || k->rd.op != OP_NONE || k->wr.op != OP_NONE)
        return luaL_error(L, "http.relay_upgrade: the socket is closed or busy");
    if (r->closed) {
        lua_pushnil(L);
        lua_pushliteral(L, "client closed");
        return 2;
    }
    if (mh_req_upgrade(r) < 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "cannot switch protocols");
        return 2;
    }
    set_head(L, r, status, 4);
    struct lrelay *u = calloc(1, sizeof *u);
    if (!u)
        return luaL_error(L, "out of memory");
    mh_req_flush(r);
    u->x = mh_relay_start(r, k->s, mh_gen_loop(t->gen), idle, (size_t)max_buffer, on_done, u);
    if (!u->x) {
        free(u);
        mh_req_abort(r);
        return luaL_error(L, "out of memory");
    }
    if (u->why) /* ended at once (the upstream had closed after its 101) */
        return push_done(L, u);
    u->t = t;
    return mh_task_wait(L, t, resume_relay, cancel_relay, u);
}

/*
 * core.extended_connect(req) -> whether req is an HTTP/2 extended CONNECT
 * (RFC 8441): it reaches Lua as a GET, and only its stream can switch.
 */
static int l_extended_connect(lua_State *L)
{
    struct mh_task *t = mh_task_current(L);
    struct mh_req *r = t ? t->request : NULL;
    lua_pushboolean(L, r && lua_touserdata(L, 1) == (void *)t->req && r->head.connect_websocket);
    return 1;
}

void mh_lua_relay_core_open(lua_State *L)
{
    lua_pushcfunction(L, l_extended_connect);
    lua_setfield(L, -2, "extended_connect");
    lua_pushcfunction(L, l_relay);
    lua_setfield(L, -2, "relay");
}
