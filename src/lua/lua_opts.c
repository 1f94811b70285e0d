#include "lua_opts.h"

#include "settings.h"
#include "suggest.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KNOWN 64

/* Above it a size is surely a typo: the max_body_bytes setting's ceiling, 1024g. */
#define MAX_SIZE ((double)(1ull << 40))
/* Above it (about 31 years) a number of seconds is surely a typo. */
#define MAX_SECONDS 1e9

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

/* Raises `<where> what: name must be <must>`. */
static void misuse(lua_State *L, int level, const char *what, const char *name, const char *must)
{
    luaL_where(L, level);
    lua_pushfstring(L, "%s: %s must be %s", what, name, must);
    lua_concat(L, 2);
    lua_error(L);
}

/* Pushes t[name] (nil when there is no table) and returns its type. */
static int get_opt(lua_State *L, int idx, const char *name)
{
    if (!idx || lua_isnil(L, idx)) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    return lua_getfield(L, idx, name);
}

/* A number of seconds below MAX_SECONDS and >= 0, or > above when bounded. */
static double seconds(lua_State *L, int idx, const char *what, const char *name, double dflt,
                      bool bounded, double above, int level)
{
    int t = get_opt(L, idx, name);
    double v = t == LUA_TNIL ? dflt : t == LUA_TNUMBER ? lua_tonumber(L, -1) : NAN;
    lua_pop(L, 1);
    if (!((bounded ? v > above : v >= 0) && v < MAX_SECONDS)) { /* NaN fails too */
        char must[64];
        snprintf(must, sizeof must, "a number of seconds %s %g", bounded ? ">" : ">=",
                 bounded ? above : 0);
        misuse(L, level, what, name, must);
    }
    return v;
}

double mh_lua_opt_seconds(lua_State *L, int idx, const char *what, const char *name, double dflt,
                          int level)
{
    return seconds(L, idx, what, name, dflt, false, 0, level);
}

double mh_lua_opt_number(lua_State *L, int idx, const char *what, const char *name, double dflt,
                         double min, int level)
{
    int t = get_opt(L, idx, name);
    double v = t == LUA_TNIL ? dflt : t == LUA_TNUMBER ? lua_tonumber(L, -1) : NAN;
    lua_pop(L, 1);
    if (!(v >= min)) {
        char must[64];
        snprintf(must, sizeof must, "a number >= %g", min);
        misuse(L, level, what, name, must);
    }
    return v;
}

bool mh_lua_to_size(lua_State *L, int idx, double *out)
{
    double v;
    int t = lua_type(L, idx);
    if (t == LUA_TNUMBER)
        v = lua_tonumber(L, idx);
    else if (t != LUA_TSTRING || mh_config_parse_bytes(lua_tostring(L, idx), &v) < 0)
        return false;
    if (!(v >= 0 && v <= MAX_SIZE && v == floor(v)))
        return false;
    *out = v;
    return true;
}

double mh_lua_opt_size(lua_State *L, int idx, const char *what, const char *name, double dflt,
                       double min, int level)
{
    double v = dflt;
    bool ok = get_opt(L, idx, name) == LUA_TNIL || mh_lua_to_size(L, -1, &v);
    lua_pop(L, 1);
    if (!ok || v < min) {
        char at_least[32] = "";
        if (min > 0)
            snprintf(at_least, sizeof at_least, " >= %.0f", min);
        char must[96];
        snprintf(must, sizeof must,
                 "a size in bytes%s (a number, or a string like \"64k\", \"1m\")", at_least);
        misuse(L, level, what, name, must);
    }
    return v;
}

/* The options table of a Lua call below: nil or a table. */
static void check_table(lua_State *L)
{
    if (!lua_isnil(L, 1))
        luaL_checktype(L, 1, LUA_TTABLE);
}

/*
 * The Lua calls: t may be nil; an absent field gives the default as it was
 * passed (nil too), a present one comes back as it is (an integer stays
 * one), a size as an integer.
 */

/*
 * core.opt_seconds(t, name, default, what [, level [, above]]): with above,
 * the value must be greater than it (an interval of 0 would spin), not >= 0.
 */
static int l_opt_seconds(lua_State *L)
{
    check_table(L);
    const char *name = luaL_checkstring(L, 2);
    const char *what = luaL_checkstring(L, 4);
    int level = (int)luaL_optinteger(L, 5, 2);
    bool bounded = !lua_isnoneornil(L, 6);
    double above = bounded ? luaL_checknumber(L, 6) : 0;
    if (get_opt(L, 1, name) == LUA_TNIL) {
        lua_pushvalue(L, 3);
        return 1;
    }
    seconds(L, 1, what, name, 0, bounded, above, level);
    return 1;
}

/* core.opt_number(t, name, default, min, what [, level]) */
static int l_opt_number(lua_State *L)
{
    check_table(L);
    const char *name = luaL_checkstring(L, 2);
    double min = luaL_checknumber(L, 4);
    const char *what = luaL_checkstring(L, 5);
    int level = (int)luaL_optinteger(L, 6, 2);
    if (get_opt(L, 1, name) == LUA_TNIL) {
        lua_pushvalue(L, 3);
        return 1;
    }
    mh_lua_opt_number(L, 1, what, name, 0, min, level);
    return 1;
}

/* core.opt_size(t, name, default, what [, min [, level]]) */
static int l_opt_size(lua_State *L)
{
    check_table(L);
    const char *name = luaL_checkstring(L, 2);
    const char *what = luaL_checkstring(L, 4);
    double min = luaL_optnumber(L, 5, 1);
    int level = (int)luaL_optinteger(L, 6, 2);
    if (get_opt(L, 1, name) == LUA_TNIL) {
        lua_pushvalue(L, 3);
        return 1;
    }
    lua_pushinteger(L, (lua_Integer)mh_lua_opt_size(L, 1, what, name, 0, min, level));
    return 1;
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

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * __index of a module table made strict: a name it does not have raises at
 * the line that read it, with the name meant: the module's own for a name
 * from elsewhere (upvalue 2: { connect = "pool" }), else the closest it
 * has, else the list of them. Upvalue 1: the module as users write it ("pg").
 */
static int l_strict_index(lua_State *L)
{
    if (lua_type(L, 2) != LUA_TSTRING)
        return 0;
    size_t len;
    const char *k = lua_tolstring(L, 2, &len);
    const char *mod = lua_tostring(L, lua_upvalueindex(1));
    if (lua_getfield(L, lua_upvalueindex(2), k) == LUA_TSTRING)
        return luaL_error(L, "%s.%s does not exist (did you mean %s.%s?)", mod, k, mod,
                          lua_tostring(L, -1));
    lua_pop(L, 1);
    /* The keys stay alive in the table while the names are used below. */
    const char *names[MAX_KNOWN];
    size_t n = 0;
    struct mh_suggest s;
    mh_suggest_init(&s, k, len, false);
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING || lua_tostring(L, -1)[0] == '_')
            continue;
        mh_suggest_try(&s, lua_tostring(L, -1));
        if (n < MAX_KNOWN)
            names[n++] = lua_tostring(L, -1);
    }
    if (s.best)
        return luaL_error(L, "%s.%s does not exist (did you mean %s.%s?)", mod, k, mod, s.best);
    qsort(names, n, sizeof names[0], cmp_names);
    luaL_Buffer b;
    luaL_where(L, 1);
    luaL_buffinit(L, &b);
    for (size_t i = 0; i < n; i++) {
        luaL_addstring(&b, i ? ", " : "");
        luaL_addstring(&b, names[i]);
    }
    luaL_pushresult(&b);
    lua_pushfstring(L, "%s.%s does not exist (%s has: %s)", mod, k, mod, lua_tostring(L, -1));
    lua_remove(L, -2);
    lua_concat(L, 2);
    return lua_error(L);
}

/*
 * core.strict_module(t, name [, meant]): t, which now raises for a name it
 * lacks; meant maps names people bring from elsewhere to t's own. See
 * l_strict_index.
 */
static int l_strict_module(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkstring(L, 2);
    if (!lua_isnoneornil(L, 3))
        luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    if (lua_isnil(L, 3)) {
        lua_newtable(L);
        lua_replace(L, 3);
    }
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_pushcclosure(L, l_strict_index, 2);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, 1);
    lua_settop(L, 1);
    return 1;
}

void mh_lua_opts_open(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"check_opts", l_check_opts},
        {"opt_seconds", l_opt_seconds},
        {"opt_number", l_opt_number},
        {"opt_size", l_opt_size},
        {"strict_module", l_strict_module},
        {NULL, NULL},
    };
    luaL_setfuncs(L, fns, 0);
}
