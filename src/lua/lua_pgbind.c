/*
 * moonhttp.pgbind: see lua_pgbind.h. Before, pg.lua built each query's
 * parameters as four small tables of strings (values, formats, OIDs, which
 * were Lua strings) and packed the Bind with string.pack and a concat: the
 * allocations were about a sixth of a /db request's instructions
 * (bench/TFB.md). Here a query's own arguments become the message with one
 * string allocated, the batch itself.
 */
#include "lua_pgbind.h"

#include "pg_wire.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define BYTEA 17 /* the type OID whose strings go in binary, byte for byte */

/* Parameters on the C stack up to this many; more take a userdata. */
#define SMALL 8

/* Room for the text of a number: %.17g and int64 both fit. */
#define NUM 32

/* The text form PostgreSQL reads for a number, as types.lua's encode_param writes it. */
static void number_param(lua_State *L, int arg, struct mh_pg_param *p, char *num)
{
    p->v = num;
    if (lua_isinteger(L, arg)) {
        p->len = mh_pg_int_text((int64_t)lua_tointeger(L, arg), num);
        return;
    }
    double f = (double)lua_tonumber(L, arg);
    int len;
    if (isnan(f))
        len = snprintf(num, NUM, "NaN");
    else if (isinf(f))
        len = snprintf(num, NUM, f > 0 ? "Infinity" : "-Infinity");
    else
        len = snprintf(num, NUM, "%.17g", f);
    p->len = (size_t)len;
}

/* Whether the server said parameter i (1-based) is bytea: ptypes at index 2. */
static bool is_bytea(lua_State *L, int i)
{
    bool bytea = lua_rawgeti(L, 2, i) == LUA_TNUMBER && lua_tointeger(L, -1) == BYTEA;
    lua_pop(L, 1);
    return bytea;
}

/*
 * Fills p with argument arg, parameter i (num: room for a number's text). Returns false for a
 * string that text cannot carry (a NUL byte, the parameter not bytea). Raises for a value with no
 * SQL form here: pg.lua turns its tables (pg.json, pg.bytea, arrays) into strings first, so
 * anything else is misuse.
 */
static bool param(lua_State *L, int arg, int i, struct mh_pg_param *p, char *num)
{
    p->binary = false;
    switch (lua_type(L, arg)) {
    case LUA_TNIL:
        p->v = NULL;
        return true;
    case LUA_TLIGHTUSERDATA:
        if (!lua_rawequal(L, arg, 3))
            break;
        p->v = NULL; /* pg.null */
        return true;
    case LUA_TBOOLEAN:
        p->v = lua_toboolean(L, arg) ? "true" : "false";
        p->len = strlen(p->v);
        return true;
    case LUA_TNUMBER:
        number_param(L, arg, p, num);
        return true;
    case LUA_TSTRING:
        p->v = lua_tolstring(L, arg, &p->len);
        p->binary = is_bytea(L, i);
        return p->binary || !memchr(p->v, '\0', p->len);
    default:
        break;
    }
    return luaL_error(L, "pg: parameter $%d: cannot send a %s", i, luaL_typename(L, arg));
}

/*
 * bind(stmt, ptypes, null, ...) -> batch, or nil, "nul", i, or nil, "too large".
 * The batch (Bind, Execute, Sync) of one query on prepared statement stmt
 * with the arguments after null as its parameters: nil or null is NULL,
 * booleans, numbers and strings go as text, strings for a parameter
 * ptypes[i] says is bytea in binary. "nul": parameter i is a string with a
 * NUL byte for a text parameter; "too large": the message would pass the
 * server's bound.
 */
static int l_bind(lua_State *L)
{
    size_t slen;
    const char *stmt = luaL_checklstring(L, 1, &slen);
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checkany(L, 3);
    int n = lua_gettop(L) - 3;
    if (n > MH_PG_MAX_PARAMS)
        return luaL_error(L, "pg: at most %d parameters", MH_PG_MAX_PARAMS);
    struct mh_pg_param small[SMALL];
    char small_nums[SMALL * NUM];
    struct mh_pg_param *p = small;
    char *nums = small_nums;
    if (n > SMALL) {
        p = lua_newuserdatauv(L, (size_t)n * (sizeof *p + NUM), 0);
        nums = (char *)(p + n);
    }
    for (int i = 0; i < n; i++) {
        if (!param(L, 4 + i, i + 1, &p[i], nums + (size_t)i * NUM)) {
            lua_pushnil(L);
            lua_pushliteral(L, "nul");
            lua_pushinteger(L, i + 1);
            return 3;
        }
    }
    size_t size = mh_pg_bind_size(slen, p, (unsigned)n);
    if (size == 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "too large");
        return 2;
    }
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, size);
    mh_pg_bind(out, stmt, slen, p, (unsigned)n);
    luaL_pushresultsize(&b, size);
    return 1;
}

int mh_lua_pgbind_open(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"bind", l_bind},
        {NULL, NULL},
    };
    luaL_newlib(L, fns);
    return 1;
}
