/*
 * moonhttp.resp: see lua_redis_resp.h. One call per reply replaces the Lua
 * reader's two socket reads (the line, then the bulk), its string.sub and
 * string.match calls and a tonumber per reply (bench/notes/2026-12-06-redis-json.md).
 */
#include "lua_redis_resp.h"

#include "redis_resp.h"

#include <lauxlib.h>
#include <stdio.h>

/* Stack slots of read()'s arguments. */
enum { ARG_BUF = 1, ARG_POS, ARG_NULL, ARG_ERRMT };

/*
 * Pushes the value of the item at *p (already checked whole by
 * mh_resp_reply) and moves *p past it, elements included. An error reply
 * becomes { err = text } with the ErrorReply metatable: inside an array it
 * cannot be nil, err.
 */
static void push_value(lua_State *L, const char **p, const char *end)
{
    struct mh_resp_item it;
    long n = mh_resp_item(*p, (size_t)(end - *p), &it);
    *p += n;
    switch (it.type) {
    case '+':
        lua_pushlstring(L, it.data, it.len);
        return;
    case '-':
        lua_createtable(L, 0, 1);
        lua_pushlstring(L, it.data, it.len);
        lua_setfield(L, -2, "err");
        lua_pushvalue(L, ARG_ERRMT);
        lua_setmetatable(L, -2);
        return;
    case ':':
        lua_pushinteger(L, (lua_Integer)it.n);
        return;
    case '$':
        if (it.n < 0)
            lua_pushvalue(L, ARG_NULL);
        else
            lua_pushlstring(L, it.data, it.len);
        return;
    default: /* '*' */
        if (it.n < 0) {
            lua_pushvalue(L, ARG_NULL);
            return;
        }
        /* at most MH_RESP_MAX_DEPTH + 1 levels: mh_resp_reply refused deeper */
        luaL_checkstack(L, 2, "redis reply");
        lua_createtable(L, (int)it.n, 0);
        for (int64_t i = 1; i <= it.n; i++) {
            push_value(L, p, end);
            lua_rawseti(L, -2, (lua_Integer)i);
        }
    }
}

/*
 * read(buf, pos, null, ErrorReply) → from buf's byte pos on, one reply:
 *   next, value          (next: the byte after it; nulls as `null`)
 *   next, nil, message   (an error reply)
 *   nil, need            (not whole: buf must hold at least `need` bytes from pos on)
 *   false                (not RESP)
 */
static int l_read(lua_State *L)
{
    size_t blen;
    const char *buf = luaL_checklstring(L, ARG_BUF, &blen);
    lua_Integer pos = luaL_checkinteger(L, ARG_POS);
    luaL_checkany(L, ARG_NULL);
    luaL_checktype(L, ARG_ERRMT, LUA_TTABLE);
    if (pos < 1 || (size_t)pos > blen + 1)
        return luaL_argerror(L, ARG_POS, "out of range");
    lua_settop(L, ARG_ERRMT);
    const char *p = buf + pos - 1, *end = buf + blen;
    size_t need;
    long size = mh_resp_reply(p, (size_t)(end - p), &need);
    if (size == MH_RESP_BAD) {
        lua_pushboolean(L, 0);
        return 1;
    }
    if (size == MH_RESP_MORE) {
        lua_pushnil(L);
        lua_pushinteger(L, (lua_Integer)need);
        return 2;
    }
    lua_pushinteger(L, pos + size);
    if (*p == '-') {
        struct mh_resp_item it;
        mh_resp_item(p, (size_t)size, &it);
        lua_pushnil(L);
        lua_pushlstring(L, it.data, it.len);
        return 3;
    }
    push_value(L, &p, p + size);
    return 2;
}

/* tag, the decimal n, "\r\n": a RESP length line. */
static void add_head(luaL_Buffer *b, char tag, size_t n)
{
    char num[24], *p = num + sizeof num;
    *--p = '\n';
    *--p = '\r';
    do {
        *--p = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    *--p = tag;
    luaL_addlstring(b, p, (size_t)(num + sizeof num - p));
}

/*
 * command(...) → the RESP bytes of one command: an array of bulk strings,
 * numbers written as integers when they are whole ("%d"), else "%.17g".
 * Raises for any other argument (misuse). Replaces a Lua encoder whose
 * "*" .. n and "$" .. #a formatted each length through snprintf and
 * whose parts went through a table and table.concat.
 */
static int l_command(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    add_head(&b, '*', (size_t)n);
    for (int i = 1; i <= n; i++) {
        char num[32];
        const char *s;
        size_t len;
        int isint;
        switch (lua_type(L, i)) {
        case LUA_TSTRING:
            s = lua_tolstring(L, i, &len);
            break;
        case LUA_TNUMBER: {
            lua_Integer v = lua_tointegerx(L, i, &isint);
            int w = isint ? snprintf(num, sizeof num, LUA_INTEGER_FMT, v)
                          : snprintf(num, sizeof num, "%.17g", (double)lua_tonumber(L, i));
            s = num;
            len = (size_t)w;
            break;
        }
        default:
            return luaL_error(L, "redis: argument %d must be a string or number, got %s", i,
                              luaL_typename(L, i));
        }
        add_head(&b, '$', len);
        luaL_addlstring(&b, s, len);
        luaL_addlstring(&b, "\r\n", 2);
    }
    luaL_pushresult(&b);
    return 1;
}

int mh_lua_resp_open(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"read", l_read},
        {"command", l_command},
        {NULL, NULL},
    };
    luaL_newlib(L, fns);
    return 1;
}
