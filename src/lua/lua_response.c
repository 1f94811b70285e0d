#include "lua_response.h"

#include "lua_errors.h"
#include "lua_json.h"
#include "lua_sched.h"
#include "lua_vm.h"
#include "req.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#define RESPONSE_MT "moonhttp.Response"

const char mh_response_mt_key = 0;

/* to_res for any res but the running handler's own: upvalue 1 of every method is the metatable. */
static __attribute__((noinline)) struct mh_lua_res *to_other_res(lua_State *L, struct mh_lua_res *r)
{
    if (!r || !lua_getmetatable(L, 1) || !lua_rawequal(L, -1, lua_upvalueindex(1)))
        luaL_typeerror(L, 1, RESPONSE_MT);
    lua_pop(L, 1);
    return r;
}

/* As req's: the handler's own res needs no check (and its methods no frame for one). */
static inline struct mh_lua_res *to_res(lua_State *L)
{
    struct mh_lua_res *r = lua_touserdata(L, 1);
    const struct mh_task *t = mh_task_of_thread(L);
    if (r && t && r == t->res)
        return r;
    return to_other_res(L, r);
}

/* The error of a res kept past its request: out of line, so the methods' fast path has no frame. */
static __attribute__((noinline, noreturn)) void finished(lua_State *L)
{
    luaL_error(L, "request finished: this res belongs to a handler that has returned");
    abort(); /* not reached: luaL_error raises */
}

static inline struct mh_lua_res *check_res(lua_State *L)
{
    struct mh_lua_res *r = to_res(L);
    if (!r->r)
        finished(L);
    return r;
}

/* luaL_checklstring (the same message) without its extra call: res:header and res:write. */
static inline const char *check_string(lua_State *L, int i, size_t *len)
{
    const char *s = lua_tolstring(L, i, len);
    if (!s)
        luaL_typeerror(L, i, "string");
    return s;
}

static void check_not_written(lua_State *L, struct mh_req *c, const char *what)
{
    if (c->res.written)
        luaL_error(L,
                   "%s: the response has started (res:write was called); set the status and "
                   "headers before writing",
                   what);
}

static int res_status(lua_State *L)
{
    struct mh_req *c = check_res(L)->r;
    lua_Integer code = luaL_checkinteger(L, 2);
    luaL_argcheck(L, code >= 100 && code <= 999, 2, "status must be 100..999");
    luaL_argcheck(L, code != 100 && code != 101, 2, "1xx responses are sent by the server");
    check_not_written(L, c, "res:status");
    c->res.status = (int)code;
    lua_settop(L, 1);
    return 1;
}

static int set_header(lua_State *L, bool replace)
{
    struct mh_req *c = check_res(L)->r;
    size_t nlen, vlen;
    const char *name = check_string(L, 2, &nlen);
    const char *value = check_string(L, 3, &vlen);
    check_not_written(L, c, replace ? "res:header" : "res:add_header");
    const char *err = mh_response_header(&c->res, name, nlen, value, vlen, replace);
    if (err)
        return luaL_error(L, "header %s: %s", name, err);
    lua_pushvalue(L, 1); /* res, for chaining (cheaper than lua_settop) */
    return 1;
}

static int res_header(lua_State *L)
{
    return set_header(L, true);
}

static int res_add_header(lua_State *L)
{
    return set_header(L, false);
}

/* True when a Trailer field of the head names name already (its value is a list of names). */
static bool announced(const struct mh_response *r, const char *name, size_t nlen)
{
    uint32_t i = 0;
    const char *n, *v;
    size_t nl, vl;
    while (mh_response_pair(r, &i, &n, &nl, &v, &vl)) {
        if (!mh_strieq(n, nl, "trailer", 7))
            continue;
        for (size_t at = 0; at < vl;) {
            while (at < vl && (v[at] == ',' || v[at] == ' ' || v[at] == '\t'))
                at++;
            size_t start = at;
            while (at < vl && v[at] != ',' && v[at] != ' ' && v[at] != '\t')
                at++;
            if (at > start && mh_strieq(v + start, at - start, name, nlen))
                return true;
        }
    }
    return false;
}

/*
 * Adds one trailer; misuse (a bad name or value) raises as res:header does.
 * While the head can still change, the name is also announced in a Trailer
 * field (RFC 9110 §6.6.2), so a recipient knows what to wait for; set after
 * the head went out (a streamed body), the trailer is sent unannounced, as
 * the RFC allows, unless the handler announced it itself with res:header.
 */
static void add_trailer(lua_State *L, struct mh_req *c, int name_i, int value_i)
{
    size_t nlen, vlen;
    const char *name = lua_tolstring(L, name_i, &nlen);
    const char *value = lua_type(L, value_i) == LUA_TSTRING || lua_type(L, value_i) == LUA_TNUMBER
                            ? lua_tolstring(L, value_i, &vlen)
                            : NULL;
    if (!value)
        luaL_error(L, "res:trailers: the value of %s must be a string or a list of strings", name);
    const char *err = mh_response_trailer(&c->res, name, nlen, value, vlen);
    if (err)
        luaL_error(L, "res:trailers: %s: %s", name, err);
    if (!c->res.written && !c->res.head_sent && !announced(&c->res, name, nlen) &&
        (err = mh_response_header(&c->res, "Trailer", 7, name, nlen, false)))
        luaL_error(L, "res:trailers: %s: %s", name, err);
}

/*
 * res:trailers{ name = value | { values } } -> res; or nil, err when this
 * response cannot carry trailers: HTTP/1.0, or an HTTP/1.1 body framed by
 * Content-Length (set by the handler, or a head already sent with one).
 * The fields go out after the body when the handler finishes: on HTTP/1.1
 * the body is then chunked (even a response finished at once), on HTTP/2
 * they are a last HEADERS frame. The client need not have sent "TE:
 * trailers": RFC 9110 §6.5 lets a recipient drop trailers it does not want.
 */
static int res_trailers(lua_State *L)
{
    struct mh_req *c = check_res(L)->r;
    luaL_checktype(L, 2, LUA_TTABLE);
    const char *why = NULL;
    if (c->head.http_major == 1 && c->head.http_minor == 0)
        why = "no trailers in HTTP/1.0";
    else if (c->head.http_major == 1 &&
             (c->res.has_length || (c->res.head_sent && !c->res.chunked)))
        why = "trailers need a chunked body (Content-Length is set)";
    if (why) {
        lua_pushnil(L);
        lua_pushstring(L, why);
        return 2;
    }
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            return luaL_error(L, "res:trailers: names must be strings");
        if (lua_type(L, -1) == LUA_TTABLE) {
            for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
                add_trailer(L, c, -3, -1);
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        } else {
            add_trailer(L, c, -2, -1);
        }
        lua_pop(L, 1);
    }
    lua_settop(L, 1);
    return 1;
}

static int resume_written(struct mh_task *t, lua_State *co)
{
    if (t->request->closed) {
        lua_pushnil(co);
        lua_pushliteral(co, "connection closed");
        return 2;
    }
    lua_pushboolean(co, 1);
    return 1;
}

/*
 * Strings at least this long are referenced, not copied, until written: a
 * registry reference and a generation reference cost more than copying a
 * short string.
 */
#define REF_MIN 4096

/* Releases a referenced string once the protocol wrote it (or dropped it). */
static void release_string(void *ud, uintptr_t ref)
{
    struct mh_gen *g = ud;
    luaL_unref(g->L, LUA_REGISTRYINDEX, (int)ref);
    mh_gen_unref(g); /* the string's state must outlive the bytes on the wire */
}

/* Stages s[0..len), the string at stack index i. */
static const char *stage(lua_State *L, struct mh_req *c, int i, const char *s, size_t len)
{
    if (len < REF_MIN)
        return mh_req_write(c, s, len);
    struct mh_gen *g = mh_gen_of(L);
    lua_pushvalue(L, i);
    int ref = luaL_ref(L, LUA_REGISTRYINDEX);
    mh_gen_ref(g);
    const char *err = mh_req_write_ref(c, s, len, release_string, g, (uintptr_t)ref);
    if (err == mh_req_err_nomem)
        release_string(g, (uintptr_t)ref);
    return err;
}

/*
 * Stages the values in [first, top] as body bytes. Flush policy: past the
 * streaming threshold they go out (chunked); past the high-water mark of
 * unsent output the handler waits for the client to read.
 */
static int write_values(lua_State *L, struct mh_lua_res *r, int first)
{
    struct mh_req *c = r->r;
    int top = lua_gettop(L);
    const char *s1 = NULL; /* the first value, kept from its check: the usual write has one */
    size_t len1 = 0;
    for (int i = first; i <= top; i++) {
        size_t len;
        const char *s = check_string(L, i, &len); /* type errors before any byte is staged */
        if (i == first) {
            s1 = s;
            len1 = len;
        }
    }
    if (c->closed) {
        lua_pushnil(L);
        lua_pushliteral(L, "connection closed");
        return 2;
    }
    /* nothing written: the stream should end (it is a stream once its head is out) */
    if (c->res.head_sent && mh_task_stream_stopping(r->task)) {
        lua_pushnil(L);
        lua_pushliteral(L, "stopping");
        return 2;
    }
    c->res.written = true;
    for (int i = first; i <= top; i++) {
        size_t len = len1;
        const char *s = i == first ? s1 : lua_tolstring(L, i, &len);
        if (stage(L, c, i, s, len) == mh_req_err_nomem)
            return luaL_error(L, "res:write: out of memory");
    }
    if (c->res.body.bytes >= MH_RESPONSE_STREAM_AT) {
        mh_req_flush(c);
        /* Only the handler waits for the client; a light thread's output just queues. */
        if (mh_task_output_high(r->task) && mh_task_current(L) == r->task) {
            struct mh_task *t = mh_task_check(L, "res:write");
            return mh_task_yield(L, t, MH_WAIT_WRITABLE, resume_written);
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int res_write(lua_State *L)
{
    return write_values(L, check_res(L), 2);
}

static int res_flush(lua_State *L)
{
    struct mh_lua_res *r = check_res(L);
    r->r->res.written = true;
    mh_req_flush(r->r);
    lua_pushboolean(L, !r->r->closed);
    return 1;
}

/* res:json(value [, status]) with http.json.encode (upvalue 2). */
static int res_json(lua_State *L)
{
    struct mh_lua_res *r = check_res(L);
    struct mh_req *c = r->r;
    luaL_checkany(L, 2);
    if (!lua_isnoneornil(L, 3)) {
        lua_Integer code = luaL_checkinteger(L, 3);
        luaL_argcheck(L, code >= 200 && code <= 999, 3, "status must be 200..999");
        check_not_written(L, c, "res:json");
        c->res.status = (int)code;
    }
    if (!c->res.has_type && !c->res.written) {
        /* a constant pair: no need to validate it on every response */
        if (mh_response_add_trusted(&c->res, "Content-Type", 12, "application/json", 16) == NULL)
            c->res.has_type = true;
    }
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_pushvalue(L, 2);
    lua_call(L, 1, 1);
    lua_replace(L, 2);
    lua_settop(L, 2);
    return write_values(L, r, 2);
}

static int res_redirect(lua_State *L)
{
    struct mh_req *c = check_res(L)->r;
    size_t len;
    const char *url = luaL_checklstring(L, 2, &len);
    lua_Integer code = luaL_optinteger(L, 3, 302);
    luaL_argcheck(L, code >= 300 && code <= 399, 3, "redirect status must be 3xx");
    check_not_written(L, c, "res:redirect");
    const char *err = mh_response_header(&c->res, "Location", 8, url, len, true);
    if (err)
        return luaL_error(L, "res:redirect: %s", err);
    c->res.status = (int)code;
    lua_settop(L, 1);
    return 1;
}

/* res:set_write_timeout(seconds): the response must be done within `seconds` from now (0 = no
 * limit). */
static int res_set_write_timeout(lua_State *L)
{
    struct mh_req *c = check_res(L)->r;
    lua_Number s = luaL_checknumber(L, 2);
    luaL_argcheck(L, s >= 0, 2, "must be >= 0");
    c->ops->set_write_timeout(c, s);
    lua_settop(L, 1);
    return 1;
}

static int res_tostring(lua_State *L)
{
    struct mh_lua_res *r = to_res(L);
    if (r->r)
        lua_pushfstring(L, "moonhttp.Response (%d)", r->r->res.status);
    else
        lua_pushliteral(L, "moonhttp.Response (finished)");
    return 1;
}

/*
 * core.reset_for_error(res): the response becomes an empty 500 for the app's
 * error handler to fill. False when it cannot: its head has gone out.
 */
static int l_reset_for_error(lua_State *L)
{
    struct mh_lua_res *r = luaL_checkudata(L, 1, "moonhttp.Response");
    struct mh_req *c = r->r;
    if (!c)
        return luaL_error(L, "request finished: this res belongs to a handler that has returned");
    bool ok = !c->closed && !c->res.head_sent;
    if (ok)
        mh_lua_reset_to_500(mh_gen_of(L), c);
    lua_pushboolean(L, ok);
    return 1;
}

void mh_lua_response_open_core(lua_State *L)
{
    lua_pushcfunction(L, l_reset_for_error);
    lua_setfield(L, -2, "reset_for_error");
}

void mh_lua_response_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"status", res_status},
        {"header", res_header},
        {"add_header", res_add_header},
        {"trailers", res_trailers},
        {"write", res_write},
        {"flush", res_flush},
        {"redirect", res_redirect},
        {"set_write_timeout", res_set_write_timeout},
        {NULL, NULL},
    };
    luaL_newmetatable(L, RESPONSE_MT);
    int mt = lua_gettop(L);
    luaL_newlibtable(L, methods);
    lua_pushvalue(L, mt);
    luaL_setfuncs(L, methods, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, mt, "__methods"); /* for mh_lua_web_open to extend */
    lua_pushvalue(L, mt);
    lua_pushcfunction(L, mh_json_encode_l);
    lua_pushcclosure(L, res_json, 2); /* upvalues: metatable, http.json.encode */
    lua_setfield(L, -2, "json");
    lua_setfield(L, mt, "__index");
    lua_pushvalue(L, mt);
    lua_pushcclosure(L, res_tostring, 1);
    lua_setfield(L, mt, "__tostring");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &mh_response_mt_key);
}
