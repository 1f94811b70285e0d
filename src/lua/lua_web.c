#include "lua_web.h"

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

int mh_lua_web_open(lua_State *L)
{
    static const luaL_Reg fns[] = {{"extend", l_extend}, {NULL, NULL}};
    luaL_newlib(L, fns);
    mh_lua_multipart_open(L);
    lua_setfield(L, -2, "multipart");
    return 1;
}
