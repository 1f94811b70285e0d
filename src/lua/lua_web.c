#include "lua_web.h"

#include "html.h"
#include "lua_multipart.h"

#include <lauxlib.h>

/* extend(kind, methods) -> the methods it replaced, by name. */
static int l_extend(lua_State *L)
{
    static const char *const kinds[] = {"request", "response", NULL};
    static const char *const mts[] = {"moonhttp.Request", "moonhttp.Response"};
    int kind = luaL_checkoption(L, 1, NULL, kinds);
    luaL_checktype(L, 2, LUA_TTABLE);
    if (luaL_getmetatable(L, mts[kind]) != LUA_TTABLE ||
        lua_getfield(L, -1, "__methods") != LUA_TTABLE)
        return luaL_error(L, "extend: %s has no method table", mts[kind]);
    int methods = lua_gettop(L);
    lua_newtable(L); /* what was replaced */
    int replaced = methods + 1;
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        luaL_checktype(L, -2, LUA_TSTRING);
        luaL_checktype(L, -1, LUA_TFUNCTION);
        lua_pushvalue(L, -2);
        lua_pushvalue(L, -1);
        lua_rawget(L, methods);
        lua_rawset(L, replaced);
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, methods);
    }
    return 1;
}

/*
 * html_escape(v) -> v as text with & < > " ' as entities. Numbers and
 * booleans become text first; nil is "". A string with nothing to escape is
 * returned itself, so the common case allocates nothing (templates call this
 * for every value they print).
 */
static int l_html_escape(lua_State *L)
{
    size_t len;
    const char *s;
    lua_settop(L, 1);
    switch (lua_type(L, 1)) {
    case LUA_TNIL:
    case LUA_TNONE:
        lua_pushliteral(L, "");
        return 1;
    case LUA_TSTRING:
        s = lua_tolstring(L, 1, &len);
        break;
    default:
        s = luaL_tolstring(L, 1, &len); /* numbers, booleans, __tostring */
        break;
    }
    size_t n = mh_html_escaped_len(s, len);
    if (n == len) {
        return 1; /* the string on top: the argument, or its text */
    }
    luaL_Buffer b;
    mh_html_escape(s, len, luaL_buffinitsize(L, &b, n));
    luaL_pushresultsize(&b, n);
    return 1;
}

int mh_lua_web_open(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"extend", l_extend}, {"html_escape", l_html_escape}, {NULL, NULL}};
    luaL_newlib(L, fns);
    mh_lua_multipart_open(L);
    lua_setfield(L, -2, "multipart");
    return 1;
}
