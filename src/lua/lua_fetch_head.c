/*
 * http.fetch's request string from its options (lua_fetch_head.h). Split
 * from lua_client.c, which keeps the exchange and the response object.
 */
#include "lua_fetch_head.h"

#include "url.h"

#include <lauxlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool bad_header_text(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0')
            return true;
    return false;
}

/* RFC 9110 tchar as a bitmap of ASCII (a strchr per byte showed: this runs over every header name)
 */
static bool is_tchar(unsigned char ch)
{
    static const uint64_t map[2] = {0x03ff6cfa00000000u, 0x57ffffffc7fffffeu};
    return ch < 128 && ((map[ch >> 6] >> (ch & 63)) & 1);
}

bool mh_lua_fetch_is_token(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)s[i]))
            return false;
    return true;
}

/* Validates one header and appends "Name: value\r\n" to the parts table at P. */
static void add_header(lua_State *L, int parts, const char *name, int vidx)
{
    size_t vlen;
    const char *v = lua_tolstring(L, vidx, &vlen);
    if (!v)
        luaL_error(L, "http.fetch: header %s: value must be a string or number", name);
    if (bad_header_text(v, vlen))
        luaL_error(L, "http.fetch: header %s: value contains CR, LF or NUL", name);
    /* a buffer rather than lua_pushfstring, which parses its format per header */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, name);
    luaL_addlstring(&b, ": ", 2);
    luaL_addlstring(&b, v, vlen);
    luaL_addlstring(&b, "\r\n", 2);
    luaL_pushresult(&b);
    lua_rawseti(L, parts, (lua_Integer)lua_rawlen(L, parts) + 1);
}

/* Collects the user's header lines into a new table pushed on the stack. */
static void collect_headers(lua_State *L, int opts, bool *has_host, bool *has_ua)
{
    lua_newtable(L);
    int parts = lua_gettop(L);
    *has_host = *has_ua = false;
    if (!opts)
        return;
    lua_getfield(L, opts, "headers");
    int hidx = lua_gettop(L);
    if (!lua_isnil(L, hidx)) {
        if (!lua_istable(L, hidx))
            luaL_error(L, "http.fetch: opts.headers must be a table");
        lua_pushnil(L);
        while (lua_next(L, hidx)) {
            size_t nlen;
            if (lua_type(L, -2) != LUA_TSTRING)
                luaL_error(L, "http.fetch: header names must be strings");
            const char *name = lua_tolstring(L, -2, &nlen);
            if (!mh_lua_fetch_is_token(name, nlen))
                luaL_error(L, "http.fetch: bad header name '%s'", name);
            if (strcasecmp(name, "content-length") == 0 ||
                strcasecmp(name, "transfer-encoding") == 0) {
                lua_pop(L, 1);
                continue;
            }
            if (strcasecmp(name, "host") == 0)
                *has_host = true;
            if (strcasecmp(name, "user-agent") == 0)
                *has_ua = true;
            if (lua_istable(L, -1)) {
                lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
                for (lua_Integer i = 1; i <= n; i++) {
                    lua_rawgeti(L, -1, i);
                    add_header(L, parts, name, lua_gettop(L));
                    lua_pop(L, 1);
                }
            } else {
                add_header(L, parts, name, lua_gettop(L));
            }
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

/*
 * Serializes the request (head and body, one string) onto the stack; with a
 * streamed body, the head only, announcing its framing. Raises for misuse.
 */
void mh_lua_fetch_request(lua_State *L, int opts, const struct mh_url *u, const char *method,
                          size_t mlen, lua_Integer stream)
{
    size_t blen = 0;
    const char *body = NULL;
    int base = lua_gettop(L);
    if (opts) {
        lua_getfield(L, opts, "body");
        if (!lua_isnil(L, -1)) {
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "http.fetch: opts.body must be a string");
            body = lua_tolstring(L, -1, &blen);
        }
    } else {
        lua_pushnil(L);
    }
    bool has_host, has_ua;
    collect_headers(L, opts, &has_host, &has_ua);
    int parts = lua_gettop(L);
    lua_Integer nparts = (lua_Integer)lua_rawlen(L, parts);
    bool need_length = body || (mlen == 4 && memcmp(method, "POST", 4) == 0) ||
                       (mlen == 3 && memcmp(method, "PUT", 3) == 0) ||
                       (mlen == 5 && memcmp(method, "PATCH", 5) == 0);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, method, mlen);
    luaL_addchar(&b, ' ');
    if (u->path_len == 0 || u->path[0] == '?')
        luaL_addchar(&b, '/');
    luaL_addlstring(&b, u->path, u->path_len);
    luaL_addstring(&b, " HTTP/1.1\r\n");
    if (!has_host) {
        luaL_addstring(&b, "Host: ");
        luaL_addlstring(&b, u->authority, u->authority_len);
        luaL_addstring(&b, "\r\n");
    }
    if (!has_ua)
        luaL_addstring(&b, "User-Agent: moonhttp/" MH_VERSION "\r\n");
    for (lua_Integer i = 1; i <= nparts; i++) {
        lua_rawgeti(L, parts, i);
        luaL_addvalue(&b);
    }
    if (stream == MH_FETCH_STREAM_CHUNKED) {
        luaL_addstring(&b, "Transfer-Encoding: chunked\r\n");
    } else if (stream >= 0 || need_length) {
        char line[48];
        int n = snprintf(line, sizeof line, "Content-Length: %zu\r\n",
                         stream >= 0 ? (size_t)stream : blen);
        luaL_addlstring(&b, line, (size_t)n);
    }
    luaL_addstring(&b, "\r\n");
    if (body)
        luaL_addlstring(&b, body, blen);
    luaL_pushresult(&b);
    lua_replace(L, base + 1);
    lua_settop(L, base + 1);
}
