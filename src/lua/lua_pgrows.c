/*
 * moonhttp.pgrows: see lua_pgrows.h. The bytes are cut by wire/pg_wire.c;
 * this file only builds Lua values. One call per answer (or per piece of
 * one) replaces, for each message, a Lua string for its body, a dozen
 * string.unpack calls and a decode call per column, which is where the
 * client's per-query instructions went (bench/notes/2026-12-05-tfb.md).
 */
#include "lua_pgrows.h"

#include "pg_wire.h"

#include <lauxlib.h>

/* Column kinds, as lua/moonhttp/pg/types.lua's kind(oid) gives them. */
enum { KIND_DECODE = 0, KIND_TEXT = 1, KIND_INT = 2 };

/* Stack slots per column while scanning: name, kind, decode. */
#define PER_COL 3

/* A column's value from its text (not NULL): integers and text here, the rest through decode. */
static void push_value(lua_State *L, int col, const char *v, size_t len)
{
    int kind = (int)lua_tointeger(L, col + 1);
    int64_t i;
    if (kind == KIND_TEXT) {
        lua_pushlstring(L, v, len);
        return;
    }
    if (kind == KIND_INT && mh_pg_int(v, len, &i)) {
        lua_pushinteger(L, (lua_Integer)i);
        return;
    }
    lua_pushvalue(L, col + 2);
    lua_pushlstring(L, v, len);
    lua_call(L, 1, 1);
}

/* Turns a checked DataRow into a row table keyed by column name; leaves it on the stack. */
static void push_row(lua_State *L, struct mh_pg_row *row, int cols, int null)
{
    lua_createtable(L, 0, (int)row->nfields);
    for (unsigned i = 0; i < row->nfields; i++) {
        int col = cols + (int)i * PER_COL;
        const char *v;
        size_t len;
        mh_pg_field(row, &v, &len);
        lua_pushvalue(L, col);
        if (v)
            push_value(L, col, v, len);
        else
            lua_pushvalue(L, null);
        lua_rawset(L, -3);
    }
}

/*
 * scan(buf, pos, cols, rows, n, null) -> pos, n, messages, tag, status.
 * From buf's byte pos on: rows appended to rows after index n, each column
 * of cols ({ name =, kind =, decode = } as pg.lua keeps them) decoded by its
 * kind; stops after ReadyForQuery (status: its byte) or before a message
 * it does not take. tag is CommandComplete's, when one was read. A DataRow
 * whose field count or lengths do not fit is left to the Lua decoder, which
 * raises (a protocol error for the client).
 */
static int l_scan(lua_State *L)
{
    size_t blen;
    const char *buf = luaL_checklstring(L, 1, &blen);
    lua_Integer pos = luaL_checkinteger(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    lua_Integer n = luaL_checkinteger(L, 5);
    luaL_checkany(L, 6);
    if (pos < 1 || (size_t)pos > blen + 1)
        return luaL_argerror(L, 2, "out of range");
    lua_settop(L, 6);
    lua_Integer ncols = (lua_Integer)lua_rawlen(L, 3);
    if (ncols > 0xffff)
        return luaL_argerror(L, 3, "too many columns");
    luaL_checkstack(L, (int)ncols * PER_COL + 8, "too many columns");
    int cols = lua_gettop(L) + 1;
    for (lua_Integer i = 1; i <= ncols; i++) {
        lua_rawgeti(L, 3, i);
        int c = lua_gettop(L);
        lua_getfield(L, c, "name");
        lua_getfield(L, c, "kind");
        lua_getfield(L, c, "decode");
        lua_remove(L, c);
    }
    size_t at = (size_t)pos - 1;
    lua_Integer messages = 0;
    int tag = 0, status = 0;
    for (;;) {
        struct mh_pg_msg m;
        long size = mh_pg_message(buf + at, blen - at, &m);
        if (size <= 0)
            break;
        if (m.type == 'D') {
            struct mh_pg_row row;
            if (!mh_pg_datarow(m.body, m.len, (unsigned)ncols, &row))
                break;
            push_row(L, &row, cols, 6);
            lua_rawseti(L, 4, ++n);
        } else if (m.type == 'C') {
            /* the tag is a C string: without its NUL, as proto.cstring */
            size_t tl = m.len > 0 && m.body[m.len - 1] == '\0' ? m.len - 1 : m.len;
            if (tag)
                lua_pop(L, 1);
            lua_pushlstring(L, m.body, tl);
            tag = lua_gettop(L);
        } else if (m.type == 'Z') {
            lua_pushlstring(L, m.body, m.len);
            status = lua_gettop(L);
        } else if (m.type != '1' && m.type != '2' && m.type != '3') {
            break;
        }
        at += (size_t)size;
        messages++;
        if (status)
            break;
    }
    lua_pushinteger(L, (lua_Integer)at + 1);
    lua_pushinteger(L, n);
    lua_pushinteger(L, messages);
    if (tag)
        lua_pushvalue(L, tag);
    else
        lua_pushnil(L);
    if (status)
        lua_pushvalue(L, status);
    else
        lua_pushnil(L);
    return 5;
}

int mh_lua_pgrows_open(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"scan", l_scan},
        {NULL, NULL},
    };
    luaL_newlib(L, fns);
    return 1;
}
