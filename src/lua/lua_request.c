#include "lua_request.h"

#include "lua_sched.h"
#include "lua_tls.h"
#include "lua_vm.h"
#include "lua_ws.h"
#include "req.h"
#include "router.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>


const char mh_request_mt_key = 0;

/*
 * Every req method and metamethod has the metatable as upvalue 1: comparing
 * it is much cheaper than luaL_checkudata's registry lookup by name. Cheaper
 * still, and the common case: the running handler's own req, found through
 * its coroutine (a userdata with that address can only be that object, which
 * the task's stack keeps alive; Lua code cannot make a light userdata).
 */
static __attribute__((noinline)) struct mh_lua_req *to_other_req(lua_State *L, struct mh_lua_req *r)
{
    if (!r || !lua_getmetatable(L, 1) || !lua_rawequal(L, -1, lua_upvalueindex(1)))
        luaL_typeerror(L, 1, MH_REQUEST_MT);
    lua_pop(L, 1);
    return r;
}

static inline struct mh_lua_req *to_req(lua_State *L)
{
    struct mh_lua_req *r = lua_touserdata(L, 1);
    const struct mh_task *t = mh_task_of_thread(L);
    if (r && t && r == t->req)
        return r;
    return to_other_req(L, r);
}

static __attribute__((noinline, noreturn)) void finished(lua_State *L)
{
    luaL_error(L, "request finished: this req belongs to a handler that has returned");
    abort(); /* not reached: luaL_error raises */
}

static inline struct mh_req *check_req(lua_State *L)
{
    struct mh_lua_req *r = to_req(L);
    if (!r->r)
        finished(L);
    return r->r;
}

static void push_slice(lua_State *L, const struct mh_req *c, struct mh_slice s)
{
    lua_pushlstring(L, mh_req_head(c) + s.off, s.len);
}

/* Pushes the %-decoded form of an escaped path (or segment); a malformed escape stays as is. */
static void push_unescaped(lua_State *L, const char *p, size_t len)
{
    if (!memchr(p, '%', len)) {
        lua_pushlstring(L, p, len);
        return;
    }
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, len);
    long n = mh_path_unescape(p, len, out);
    if (n < 0) {
        memcpy(out, p, len);
        n = (long)len;
    }
    luaL_pushresultsize(&b, (size_t)n);
}

static void push_form_unescaped(lua_State *L, const char *p, size_t len)
{
    if (!memchr(p, '%', len) && !memchr(p, '+', len)) {
        lua_pushlstring(L, p, len);
        return;
    }
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, len);
    luaL_pushresultsize(&b, mh_form_unescape(p, len, out));
}

static int push_path(lua_State *L, struct mh_req *c)
{
    const struct mh_request *r = &c->head;
    const struct mh_req_route *rt = &c->routed;
    if (rt->path && rt->path != mh_req_head(c) + r->path.off) {
        /* routed on a cleaned copy (clean_path = "rewrite") */
        push_unescaped(L, rt->path, rt->path_len);
    } else {
        push_unescaped(L, mh_req_head(c) + r->path.off, r->path.len);
    }
    return 1;
}

/*
 * req.ctx: a table of the request's own for middleware and handlers to pass
 * things along (ngx.ctx). Made on first use, so a request that never asks
 * for it costs no table; kept as the userdata's user value, so it lives as
 * long as the req object and is never seen by another request.
 */
static int push_ctx(lua_State *L)
{
    if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE)
        return 1;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, 1, 1);
    return 1;
}

static int req_index(lua_State *L)
{
    struct mh_req *c = check_req(L);
    size_t len;
    const char *k = luaL_checklstring(L, 2, &len);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(2)) != LUA_TNIL)
        return 1; /* a method */
    const struct mh_request *r = &c->head;
    char buf[64];
    switch (len) {
    case 3:
        if (!memcmp(k, "ctx", 3))
            return push_ctx(L);
        break;
    case 4:
        if (!memcmp(k, "path", 4))
            return push_path(L, c);
        if (!memcmp(k, "host", 4))
            return push_slice(L, c, r->host), 1;
        break;
    case 5:
        if (!memcmp(k, "query", 5))
            return push_slice(L, c, r->query), 1;
        if (!memcmp(k, "proto", 5)) {
            lua_pushstring(L, r->http_major == 2 ? "HTTP/2.0"
                              : r->http_minor    ? "HTTP/1.1"
                                                 : "HTTP/1.0");
            return 1;
        }
        break;
    case 6:
        if (!memcmp(k, "method", 6)) {
            lua_pushstring(L, mh_req_method(c));
            return 1;
        }
        break;
    case 7:
        if (!memcmp(k, "pattern", 7)) {
            if (c->routed.route)
                lua_pushstring(L, mh_route_pattern(c->routed.route));
            else
                lua_pushnil(L);
            return 1;
        }
        break;
    case 8:
        if (!memcmp(k, "raw_path", 8))
            return push_slice(L, c, r->path), 1;
        break;
    case 11:
        if (!memcmp(k, "remote_addr", 11)) {
            lua_pushstring(L, c->ops->remote_addr(c, buf, sizeof buf));
            return 1;
        }
        break;
    }
    lua_pushnil(L);
    return 1;
}

static int req_pathvalue(lua_State *L)
{
    struct mh_req *c = check_req(L);
    size_t len;
    const char *name = luaL_checklstring(L, 2, &len);
    const struct mh_req_route *rt = &c->routed;
    int i = rt->route ? mh_route_wildcard_index(rt->route, name, len) : -1;
    if (i < 0 || (uint32_t)i >= rt->ncaptures) {
        lua_pushnil(L);
        return 1;
    }
    push_unescaped(L, rt->path + rt->captures[i].off, rt->captures[i].len);
    return 1;
}

/*
 * Walks "a=1&b=2" pairs. For each, calls fn with the raw key and value.
 * Returns early when fn returns non-zero.
 */
static void each_query_pair(const char *q, size_t len,
                            int (*fn)(lua_State *L, const char *k, size_t kl, const char *v,
                                      size_t vl, void *ud),
                            lua_State *L, void *ud)
{
    size_t i = 0;
    while (i < len) {
        size_t end = i;
        while (end < len && q[end] != '&')
            end++;
        if (end > i) {
            const char *eq = memchr(q + i, '=', end - i);
            const char *k = q + i;
            size_t kl = eq ? (size_t)(eq - k) : end - i;
            const char *v = eq ? eq + 1 : q + end;
            size_t vl = eq ? (size_t)(q + end - v) : 0;
            if (fn(L, k, kl, v, vl, ud))
                return;
        }
        i = end + 1;
    }
}

struct arg_search {
    const char *name;
    size_t len;
    bool found;
};

static int match_arg(lua_State *L, const char *k, size_t kl, const char *v, size_t vl, void *ud)
{
    struct arg_search *s = ud;
    push_form_unescaped(L, k, kl);
    size_t dl;
    const char *dk = lua_tolstring(L, -1, &dl);
    bool same = dl == s->len && memcmp(dk, s->name, dl) == 0;
    lua_pop(L, 1);
    if (!same)
        return 0;
    push_form_unescaped(L, v, vl);
    s->found = true;
    return 1;
}

static int req_arg(lua_State *L)
{
    struct mh_req *c = check_req(L);
    struct arg_search s;
    s.name = luaL_checklstring(L, 2, &s.len);
    s.found = false;
    each_query_pair(mh_req_head(c) + c->head.query.off, c->head.query.len, match_arg, L, &s);
    if (!s.found)
        lua_pushnil(L);
    return 1;
}

static int add_arg(lua_State *L, const char *k, size_t kl, const char *v, size_t vl, void *ud)
{
    (void)ud;
    push_form_unescaped(L, k, kl);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, -3) == LUA_TNIL) { /* first value wins, as req:arg */
        lua_pop(L, 1);
        push_form_unescaped(L, v, vl);
        lua_rawset(L, -3);
    } else {
        lua_pop(L, 2);
    }
    return 0;
}

static int req_args(lua_State *L)
{
    struct mh_req *c = check_req(L);
    lua_newtable(L);
    each_query_pair(mh_req_head(c) + c->head.query.off, c->head.query.len, add_arg, L, NULL);
    return 1;
}

static int req_header(lua_State *L)
{
    struct mh_req *c = check_req(L);
    size_t len;
    const char *name = luaL_checklstring(L, 2, &len);
    int i = mh_request_find_header(&c->head, mh_req_head(c), name, len, 0);
    if (i < 0)
        lua_pushnil(L);
    else
        push_slice(L, c, c->head.headers[i].value);
    return 1;
}

static int req_headers(lua_State *L)
{
    struct mh_req *c = check_req(L);
    const struct mh_request *r = &c->head;
    const char *base = mh_req_head(c);
    lua_createtable(L, 0, (int)r->nheaders);
    for (uint32_t i = 0; i < r->nheaders; i++) {
        const struct mh_header *h = &r->headers[i];
        luaL_Buffer b;
        char *p = luaL_buffinitsize(L, &b, h->name.len);
        for (uint32_t j = 0; j < h->name.len; j++) {
            char ch = base[h->name.off + j];
            p[j] = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
        }
        luaL_pushresultsize(&b, h->name.len);
        lua_pushvalue(L, -1);
        if (lua_rawget(L, -3) == LUA_TNIL) {
            lua_pop(L, 1);
            lua_createtable(L, 1, 0);
            lua_pushvalue(L, -2);
            lua_pushvalue(L, -2);
            lua_rawset(L, -5);
        }
        push_slice(L, c, h->value);
        lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
        lua_pop(L, 2);
    }
    return 1;
}

/*
 * req:header_list() → { name1, value1, name2, value2, ... }: the headers in
 * order, names as the client wrote them (http.proxy keeps their case).
 */
static int req_header_list(lua_State *L)
{
    struct mh_req *c = check_req(L);
    const struct mh_request *r = &c->head;
    lua_createtable(L, (int)r->nheaders * 2, 0);
    for (uint32_t i = 0; i < r->nheaders; i++) {
        push_slice(L, c, r->headers[i].name);
        lua_rawseti(L, -2, 2 * (lua_Integer)i + 1);
        push_slice(L, c, r->headers[i].value);
        lua_rawseti(L, -2, 2 * (lua_Integer)i + 2);
    }
    return 1;
}

/* Pushes what a finished body wait produced: data, or nil and why not. */
static int push_body_error(lua_State *L, struct mh_req *c)
{
    const char *err = mh_req_body_error(c);
    lua_pushnil(L);
    lua_pushstring(L, err ? err : "connection closed");
    return 2;
}

static int push_whole_body(struct mh_task *t, lua_State *L)
{
    struct mh_req *c = t->request;
    if (c->closed || (c->body_state != MH_BODY_NONE))
        return push_body_error(L, c);
    lua_pushlstring(L, c->body.data ? c->body.data : "", c->body.len);
    c->body.len = 0;
    return 1;
}

static int push_some_body(struct mh_task *t, lua_State *L)
{
    struct mh_req *c = t->request;
    if (c->body.len > 0) {
        size_t n = c->body.len < t->want_bytes ? c->body.len : t->want_bytes;
        lua_pushlstring(L, c->body.data, n);
        mh_buf_consume(&c->body, n);
        return 1;
    }
    if (c->closed || c->body_state != MH_BODY_NONE)
        return push_body_error(L, c);
    lua_pushnil(L); /* end of body */
    return 1;
}

static int req_body(lua_State *L)
{
    struct mh_req *c = check_req(L);
    struct mh_task *t = mh_task_check(L, "req:body");
    if (t != to_req(L)->task) /* the protocol wakes only the handler's task */
        return luaL_error(L, "req:body: only the handler itself can wait for the body");
    if (mh_req_want_body(c, true))
        return push_whole_body(t, L);
    return mh_task_yield(L, t, MH_WAIT_BODY, push_whole_body);
}

static int req_read(lua_State *L)
{
    struct mh_req *c = check_req(L);
    lua_Integer n = luaL_optinteger(L, 2, 64 * 1024);
    luaL_argcheck(L, n > 0, 2, "must be positive");
    struct mh_task *t = mh_task_check(L, "req:read");
    if (t != to_req(L)->task)
        return luaL_error(L, "req:read: only the handler itself can wait for the body");
    t->want_bytes = (size_t)n;
    if (c->body.len > 0 || mh_req_want_body(c, false))
        return push_some_body(t, L);
    return mh_task_yield(L, t, MH_WAIT_BODY, push_some_body);
}

/* req:set_read_timeout(seconds): the body must be in within `seconds` from now (0 = no limit). */
static int req_set_read_timeout(lua_State *L)
{
    struct mh_req *c = check_req(L);
    lua_Number s = luaL_checknumber(L, 2);
    luaL_argcheck(L, s >= 0, 2, "must be >= 0");
    c->ops->set_read_timeout(c, s);
    lua_settop(L, 1);
    return 1;
}

/* req:set_max_body(bytes): this request's body limit, before its first read. */
static int req_set_max_body(lua_State *L)
{
    struct mh_req *c = check_req(L);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_argcheck(L, n >= 0, 2, "must be >= 0");
    if (mh_req_set_max_body(c, (uint64_t)n) < 0)
        return luaL_error(L, "req:set_max_body: the body is being read already; set the limit "
                             "before the first req:body() or req:read()");
    lua_settop(L, 1);
    return 1;
}

/* req:id(): mh_req_id, trusting the header named by the request_id_header setting. */
static int req_id(lua_State *L)
{
    struct mh_req *c = check_req(L);
    const char *trusted = to_req(L)->task->gen->config->request_id_header;
    size_t len;
    const char *id = mh_req_id(c, strcmp(trusted, "off") ? trusted : NULL, &len);
    lua_pushlstring(L, id, len);
    return 1;
}

/* req:websocket([opts]): lua_ws.c */
static int req_websocket(lua_State *L)
{
    return mh_lua_ws_start(L, check_req(L));
}

static int req_tostring(lua_State *L)
{
    struct mh_lua_req *r = to_req(L);
    if (!r->r) {
        lua_pushliteral(L, "moonhttp.Request (finished)");
        return 1;
    }
    const struct mh_request *q = &r->r->head;
    lua_pushfstring(L, "moonhttp.Request (%s ", mh_req_method(r->r));
    push_slice(L, r->r, q->target);
    lua_pushliteral(L, ")");
    lua_concat(L, 3);
    return 1;
}

/* req:tls() → the connection's TLS facts (lua_tls.h), or nil on plain TCP. */
static int req_tls(lua_State *L)
{
    struct mh_req *c = check_req(L);
    return mh_lua_push_tls(L, c->ops->transport ? c->ops->transport(c) : NULL);
}

void mh_lua_request_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"pathvalue", req_pathvalue},
        {"arg", req_arg},
        {"args", req_args},
        {"header", req_header},
        {"headers", req_headers},
        {"header_list", req_header_list},
        {"body", req_body},
        {"read", req_read},
        {"set_read_timeout", req_set_read_timeout},
        {"set_max_body", req_set_max_body},
        {"websocket", req_websocket},
        {"id", req_id},
        {"tls", req_tls},
        {NULL, NULL},
    };
    luaL_newmetatable(L, MH_REQUEST_MT);
    int mt = lua_gettop(L);
    luaL_newlibtable(L, methods);
    lua_pushvalue(L, mt);
    luaL_setfuncs(L, methods, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, mt, "__methods"); /* for mh_lua_web_open to extend */
    lua_pushvalue(L, mt);
    lua_insert(L, -2);
    lua_pushcclosure(L, req_index, 2); /* upvalues: metatable, methods */
    lua_setfield(L, mt, "__index");
    lua_pushvalue(L, mt);
    lua_pushcclosure(L, req_tostring, 1);
    lua_setfield(L, mt, "__tostring");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &mh_request_mt_key);
}
