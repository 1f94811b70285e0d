#include "lua_files.h"

#include "compress.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <string.h>

static int compress_types(lua_State *L, int t, struct mh_compress_conf *c, const char *what,
                          char *err, size_t errlen)
{
    if (lua_type(L, t) != LUA_TTABLE) {
        snprintf(err, errlen, "%s.types: expected a list of media types", what);
        return -1;
    }
    mh_compress_conf_clear_types(c);
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, t, i);
        size_t len;
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        const char *e = s ? mh_compress_conf_add_type(c, s, len) : "expected a string";
        lua_pop(L, 1);
        if (e) {
            snprintf(err, errlen, "%s.types[%lld]: %s", what, (long long)i, e);
            return -1;
        }
    }
    return 0;
}

int mh_lua_compress_conf(lua_State *L, int idx, struct mh_compress_conf *c, const char *what,
                         char *err, size_t errlen)
{
    idx = lua_absindex(L, idx);
    mh_compress_conf_init(c);
    if (lua_type(L, idx) == LUA_TBOOLEAN) {
        c->on = lua_toboolean(L, idx);
        return 0;
    }
    if (lua_type(L, idx) != LUA_TTABLE) {
        snprintf(err, errlen, "%s: expected a boolean or { types, min_bytes, level }", what);
        return -1;
    }
    c->on = true;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int rc = 0;
        if (!strcmp(k, "types")) {
            rc = compress_types(L, lua_gettop(L), c, what, err, errlen);
        } else if (!strcmp(k, "min_bytes") || !strcmp(k, "level")) {
            int isnum;
            lua_Integer v = lua_tointegerx(L, -1, &isnum);
            bool level = k[0] == 'l';
            if (!isnum || v < (level ? 1 : 0) || v > (level ? 9 : (lua_Integer)1 << 40)) {
                snprintf(err, errlen, "%s.%s: expected a whole number %s", what, k,
                         level ? "1..9" : ">= 0");
                rc = -1;
            } else if (level) {
                c->level = (int)v;
            } else {
                c->min_bytes = (uint64_t)v;
            }
        } else {
            snprintf(err, errlen, "%s: unknown key \"%s\" (types, min_bytes, level)", what, k);
            rc = -1;
        }
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}
