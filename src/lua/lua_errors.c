#define _GNU_SOURCE /* memmem */
#include "lua_errors.h"

#include "html.h"
#include "lua_vm.h"
#include "metrics.h"
#include "req.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#define TOSTRING_STEPS 1000000 /* instructions a __tostring may take: user code on the error path  \
                                */
#define FIELDS_SHOWN 10
#define STRING_SHOWN 60 /* bytes of a string field; longer ones end in "..." */

/* A bounded text built in C: no Lua allocation while a table is walked. */
struct text {
    char s[2048];
    size_t len;
};

static void text_add(struct text *t, const char *s, size_t n)
{
    if (n > sizeof t->s - 1 - t->len)
        n = sizeof t->s - 1 - t->len;
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = 0;
}

static void text_str(struct text *t, const char *s)
{
    text_add(t, s, strlen(s));
}

static void text_quoted(struct text *t, const char *s, size_t len)
{
    size_t n = len > STRING_SHOWN ? STRING_SHOWN : len;
    text_str(t, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"' || c == '\\')
            snprintf(e, sizeof e, "\\%c", c);
        else if (c == '\n')
            snprintf(e, sizeof e, "\\n");
        else if (c < 32 || c == 127)
            snprintf(e, sizeof e, "\\%03u", c);
        else
            snprintf(e, sizeof e, "%c", c);
        text_str(t, e);
    }
    text_str(t, n < len ? "\"..." : "\"");
}

/* The __name of v's metatable (read raw: no user code), or its type name. */
static const char *name_of(lua_State *L, int idx)
{
    const char *name = luaL_typename(L, idx);
    if (luaL_getmetafield(L, idx, "__name") != LUA_TNIL) {
        if (lua_type(L, -1) == LUA_TSTRING)
            name = lua_tostring(L, -1); /* kept alive by the metatable */
        lua_pop(L, 1);
    }
    return name;
}

/* A scalar shown in a field: never converts the value in place (it may be lua_next's key). */
static void text_value(struct text *t, lua_State *L, int idx)
{
    char num[64];
    switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        text_quoted(t, s, len);
        break;
    }
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            snprintf(num, sizeof num, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
        else
            snprintf(num, sizeof num, LUA_NUMBER_FMT, (LUAI_UACNUMBER)lua_tonumber(L, idx));
        text_str(t, num);
        break;
    case LUA_TBOOLEAN:
        text_str(t, lua_toboolean(L, idx) ? "true" : "false");
        break;
    case LUA_TTABLE:
        text_str(t, "{...}");
        break;
    default:
        text_str(t, name_of(L, idx));
    }
}

static bool is_identifier(const char *s, size_t len)
{
    if (len == 0 || len > 40 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

/* `name: {k = v, ...}`: the first FIELDS_SHOWN fields, raw (no __index, no __pairs). */
static void text_table(struct text *t, lua_State *L, int idx)
{
    text_str(t, name_of(L, idx));
    text_str(t, ": {");
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (n == FIELDS_SHOWN) {
            text_str(t, ", ...");
            lua_pop(L, 2);
            break;
        }
        text_str(t, n++ ? ", " : "");
        size_t klen;
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &klen) : NULL;
        if (k && is_identifier(k, klen)) {
            text_add(t, k, klen);
        } else {
            text_str(t, "[");
            text_value(t, L, -2);
            text_str(t, "]");
        }
        text_str(t, " = ");
        text_value(t, L, -1);
        lua_pop(L, 1);
    }
    text_str(t, "}");
}

static void on_tostring_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    luaL_error(L, "__tostring ran too long");
}

static int tostring_call(lua_State *L)
{
    luaL_tolstring(L, 1, NULL); /* raises if __tostring returns no string */
    return 1;
}

/*
 * The value at idx through its __tostring, on L's top; false (and nothing
 * pushed) without one, or when it fails. It runs on a thread of its own
 * with an instruction budget, since the error path must not hang on it,
 * and cannot yield there.
 */
static bool via_tostring(lua_State *L, int idx)
{
    if (luaL_getmetafield(L, idx, "__tostring") == LUA_TNIL)
        return false;
    lua_pop(L, 1);
    lua_State *co = lua_newthread(L);
    lua_sethook(co, on_tostring_hook, LUA_MASKCOUNT, TOSTRING_STEPS);
    lua_pushcfunction(co, tostring_call);
    lua_pushvalue(L, idx);
    lua_xmove(L, co, 1);
    bool ok = lua_pcall(co, 1, 1, 0) == LUA_OK;
    if (ok)
        lua_xmove(co, L, 1);
    lua_remove(L, ok ? -2 : -1); /* the thread */
    return ok;
}

/* core.error_text(v): see mh_lua_error_text. */
static int l_error_text(lua_State *L)
{
    luaL_checkany(L, 1);
    lua_settop(L, 1);
    int type = lua_type(L, 1);
    if (type == LUA_TSTRING || type == LUA_TNUMBER) {
        lua_tostring(L, 1); /* a number as Lua's own tostring shows it */
        return 1;
    }
    if (via_tostring(L, 1))
        return 1;
    struct text t = {.len = 0};
    t.s[0] = 0;
    if (type == LUA_TTABLE) {
        text_table(&t, L, 1);
    } else if (type == LUA_TNIL) {
        text_str(&t, "nil");
    } else if (type == LUA_TBOOLEAN) {
        text_str(&t, lua_toboolean(L, 1) ? "boolean: true" : "boolean: false");
    } else {
        char p[64];
        snprintf(p, sizeof p, ": %p", lua_topointer(L, 1));
        text_str(&t, name_of(L, 1));
        text_str(&t, p);
    }
    lua_pushlstring(L, t.s, t.len);
    return 1;
}

const char *mh_lua_error_text(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TSTRING) {
        lua_pushvalue(L, idx);
        return lua_tostring(L, -1);
    }
    lua_pushcfunction(L, l_error_text);
    lua_pushvalue(L, idx);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK || lua_type(L, -1) != LUA_TSTRING) {
        lua_pop(L, 1);
        lua_pushliteral(L, "(an error value that could not be shown)");
    }
    return lua_tostring(L, -1);
}

void mh_lua_dev_headers(const struct mh_gen *g, struct mh_req *r)
{
    const struct mh_reload_stats *st =
        g->host && g->host->reload_stats ? *g->host->reload_stats : NULL;
    if (!g->config->dev || !st || !st->last_failed)
        return;
    /* The first line of the load error, made a valid header value. */
    char v[sizeof st->last_error];
    size_t n = 0;
    for (const char *p = st->last_error; *p && n < 400; p++)
        v[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? ' ' : *p;
    mh_response_header(&r->res, "X-Moonhttp-Reload-Error", 23, v, n, true);
}

void mh_lua_reset_to_500(const struct mh_gen *g, struct mh_req *r)
{
    mh_response_reset(&r->res);
    r->res.status = 500;
    mh_lua_dev_headers(g, r);
}

/* Appends s to b escaped for HTML (base/html.h: the escaping templates use too). */
static void append_escaped(struct mh_buf *b, const char *s)
{
    size_t len = strlen(s), n = mh_html_escaped_len(s, len);
    if (mh_buf_reserve(b, n) == 0) {
        mh_html_escape(s, len, b->data + b->len);
        b->len += n;
    }
}

static bool accepts_html(const struct mh_req *r)
{
    size_t len;
    const char *v = mh_req_header(r, "accept", 6, &len);
    return v && memmem(v, len, "text/html", 9) != NULL;
}

static void write_str(struct mh_req *r, const char *s)
{
    mh_req_write(r, s, strlen(s));
}

void mh_lua_answer_error(const struct mh_gen *g, struct mh_req *r, const char *trace)
{
    mh_lua_reset_to_500(g, r);
    if (!g->config->dev) {
        write_str(r, "500 Internal Server Error\n");
        return;
    }
    if (!accepts_html(r)) {
        write_str(r, trace);
        write_str(r, "\n");
        return;
    }
    static const char type[] = "text/html; charset=utf-8";
    mh_response_header(&r->res, "Content-Type", 12, type, sizeof type - 1, true);
    struct mh_buf page = {0};
    mh_buf_append_str(&page, "<!doctype html>\n<html><head><meta charset=\"utf-8\">"
                             "<title>500 Internal Server Error</title></head>\n<body>\n"
                             "<h1>500 Internal Server Error</h1>\n<p>A handler raised an error "
                             "(moonhttp --dev; the log has it too):</p>\n<pre>");
    append_escaped(&page, trace);
    mh_buf_append_str(&page, "</pre>\n</body></html>\n");
    mh_req_write(r, page.data ? page.data : "", page.len);
    mh_buf_free(&page);
}

void mh_lua_errors_open(lua_State *L)
{
    lua_pushcfunction(L, l_error_text);
    lua_setfield(L, -2, "error_text");
}
