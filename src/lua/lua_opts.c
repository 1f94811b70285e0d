#include "lua_opts.h"

#include "suggest.h"

#include <lauxlib.h>
#include <string.h>

#define MAX_KNOWN 64

static bool is_known(const char *k, const char *const *known)
{
    for (; *known; known++)
        if (!strcmp(k, *known))
            return true;
    return false;
}

/* Raises for key k (on top of L, not a known name). */
static void unknown(lua_State *L, const char *what, const char *const *known, int level)
{
    luaL_where(L, level);
    if (lua_type(L, -2) != LUA_TSTRING) {
        lua_pushfstring(L, "%s: option names must be strings, got a %s key", what,
                        luaL_typename(L, -2));
        lua_concat(L, 2);
        lua_error(L);
    }
    size_t len;
    const char *k = lua_tolstring(L, -2, &len);
    char msg[512];
    mh_suggest_unknown(msg, sizeof msg, what, "option", k, len, known);
    lua_pushstring(L, msg);
    lua_concat(L, 2);
    lua_error(L);
}

void mh_lua_check_opts(lua_State *L, int idx, const char *what, const char *const *known, int level)
{
    if (lua_isnil(L, idx))
        return;
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING || !is_known(lua_tostring(L, -1), known))
            unknown(L, what, known, level);
    }
}

/*
 * core.check_opts(t, what, names [, level]): for the Lua modules. level
 * counts from the Lua function calling it, as error()'s does: 2 (the
 * default) names that function's caller.
 */
static int l_check_opts(lua_State *L)
{
    const char *what = luaL_checkstring(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    int level = (int)luaL_optinteger(L, 4, 2);
    if (!lua_isnil(L, 1))
        luaL_checktype(L, 1, LUA_TTABLE);
    /* No options: nothing to check, so the names are not gathered (a call per request) */
    lua_settop(L, 4);
    if (lua_isnil(L, 1))
        return 0;
    lua_pushnil(L);
    if (!lua_next(L, 1))
        return 0;
    lua_settop(L, 4);
    const char *known[MAX_KNOWN + 1];
    lua_Integer n = luaL_len(L, 3);
    luaL_argcheck(L, n <= MAX_KNOWN, 3, "too many names");
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 3, i);
        known[i - 1] = lua_tostring(L, -1); /* kept alive by the table */
        luaL_argcheck(L, known[i - 1] != NULL, 3, "names must be strings");
        lua_pop(L, 1);
    }
    known[n] = NULL;
    mh_lua_check_opts(L, 1, what, known, level);
    return 0;
}

void mh_lua_opts_open(lua_State *L)
{
    lua_pushcfunction(L, l_check_opts);
    lua_setfield(L, -2, "check_opts");
}
