#include "lua_json.h"

#include "buf.h"

#include <lauxlib.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 1000 /* as cjson: deeper is almost always a cycle */

/*
 * A table is marked as an array by a metatable with __jsonarray set: the one
 * http.json.array() gives (registry key below), or empty_array's own.
 */
static const char ARRAY_MT_KEY = 'a';

static const char *const err_oom = "out of memory";
static const char *const err_depth = "nesting deeper than 1000 (a table that contains itself?)";
static const char *const err_number = "cannot encode NaN or infinity";
static const char *const err_key = "table keys must be strings or numbers";

/*
 * The text grows in a C buffer rather than a luaL_Buffer: walking tables
 * needs the Lua stack, which a luaL_Buffer in use must not see change. No
 * call below raises (raw access only), so the buffer cannot leak past a
 * longjmp; errors are returned and raised by the caller once it is freed.
 */
struct enc {
    lua_State *L;
    struct mh_buf out;
    char what[64]; /* "cannot encode a function", ... */
};

static const char *put(struct enc *e, const char *s, size_t n)
{
    return mh_buf_append(&e->out, s, n) < 0 ? err_oom : NULL;
}

static const char *put_string(struct enc *e, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    if (mh_buf_reserve(&e->out, len + 2) < 0)
        return err_oom;
    const char *err = put(e, "\"", 1);
    size_t run = 0; /* bytes copied as they are, in one append */
    for (size_t i = 0; i < len && !err; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[6] = {'\\', 0};
        size_t elen = 2;
        switch (ch) {
        case '"':
        case '\\':
            esc[1] = (char)ch;
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            if (ch >= 0x20 && ch != 0x7f) {
                run++;
                continue;
            }
            esc[1] = 'u';
            esc[2] = esc[3] = '0';
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            elen = 6;
        }
        err = put(e, s + i - run, run);
        run = 0;
        if (!err)
            err = put(e, esc, elen);
    }
    if (!err)
        err = put(e, s + len - run, run);
    return err ? err : put(e, "\"", 1);
}

/*
 * An integer in decimal, without snprintf: ids and counts are most of the
 * numbers a JSON API writes, and snprintf cost ~750 instructions each
 * (bench/notes/2026-12-05-tfb.md: cached queries went from 449k to 300k per request).
 */
static const char *put_integer(struct enc *e, lua_Integer v)
{
    char num[24], *p = num + sizeof num;
    /* in unsigned arithmetic, so that the most negative value negates */
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    return put(e, p, (size_t)(num + sizeof num - p));
}

static const char *put_number(struct enc *e, int idx)
{
    lua_State *L = e->L;
    if (lua_isinteger(L, idx))
        return put_integer(e, lua_tointeger(L, idx));
    double d = lua_tonumber(L, idx);
    if (!isfinite(d))
        return err_number;
    /* The shortest of 15 or 17 digits that reads back as the same double. */
    char num[40];
    int n = snprintf(num, sizeof num, "%.15g", d);
    if (strtod(num, NULL) != d)
        n = snprintf(num, sizeof num, "%.17g", d);
    return put(e, num, (size_t)n);
}

/* Whether the table at idx is marked as an array, or its keys are exactly 1..n (n > 0). */
static bool is_array(lua_State *L, int idx, lua_Integer *n)
{
    *n = (lua_Integer)lua_rawlen(L, idx);
    if (lua_getmetatable(L, idx)) {
        lua_pushliteral(L, "__jsonarray");
        bool marked = lua_rawget(L, -2) != LUA_TNIL;
        lua_pop(L, 2);
        if (marked)
            return true;
    }
    if (*n == 0)
        return false;
    lua_Integer count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > *n) {
            lua_pop(L, 1);
            return false;
        }
        count++;
    }
    return count == *n;
}

static const char *put_value(struct enc *e, int idx, int depth);

static const char *put_table(struct enc *e, int idx, int depth)
{
    lua_State *L = e->L;
    if (depth > MAX_DEPTH)
        return err_depth;
    if (!lua_checkstack(L, 4))
        return err_oom;
    lua_Integer n;
    const char *err;
    if (is_array(L, idx, &n)) {
        err = put(e, "[", 1);
        for (lua_Integer i = 1; i <= n && !err; i++) {
            if (i > 1)
                err = put(e, ",", 1);
            lua_rawgeti(L, idx, i);
            if (!err)
                err = put_value(e, lua_gettop(L), depth + 1);
            lua_pop(L, 1);
        }
        return err ? err : put(e, "]", 1);
    }
    err = put(e, "{", 1);
    bool first = true;
    lua_pushnil(L);
    while (!err && lua_next(L, idx)) {
        int t = lua_type(L, -2);
        if (!first)
            err = put(e, ",", 1);
        first = false;
        if (err) {
        } else if (t == LUA_TSTRING) {
            size_t klen;
            const char *k = lua_tolstring(L, -2, &klen);
            err = put_string(e, k, klen);
        } else if (t == LUA_TNUMBER) {
            err = put(e, "\"", 1);
            err = err ? err : put_number(e, lua_gettop(L) - 1);
            err = err ? err : put(e, "\"", 1);
        } else {
            err = err_key;
        }
        err = err ? err : put(e, ":", 1);
        err = err ? err : put_value(e, lua_gettop(L), depth + 1);
        lua_pop(L, 1);
    }
    if (err) {
        lua_pop(L, 1); /* the key lua_next left */
        return err;
    }
    return put(e, "}", 1);
}

static const char *put_value(struct enc *e, int idx, int depth)
{
    lua_State *L = e->L;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        return put(e, "null", 4);
    case LUA_TBOOLEAN:
        return lua_toboolean(L, idx) ? put(e, "true", 4) : put(e, "false", 5);
    case LUA_TNUMBER:
        return put_number(e, idx);
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        return put_string(e, s, len);
    }
    case LUA_TTABLE:
        return put_table(e, idx, depth);
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == NULL) /* cjson.null */
            return put(e, "null", 4);
        /* fall through */
    default:
        snprintf(e->what, sizeof e->what, "cannot encode a %s", luaL_typename(L, idx));
        return e->what;
    }
}

int mh_json_encode_l(lua_State *L)
{
    luaL_checkany(L, 1);
    lua_settop(L, 1);
    struct enc e = {.L = L};
    const char *err = put_value(&e, 1, 0);
    if (err) {
        mh_buf_free(&e.out);
        return luaL_error(L, "json.encode: %s", err == e.what ? e.what : err);
    }
    lua_pushlstring(L, e.out.data ? e.out.data : "", e.out.len);
    mh_buf_free(&e.out);
    return 1;
}

/* json.array([t]): marks t (or a new table) to encode as an array; returns it. */
static int l_array(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_newtable(L);
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &ARRAY_MT_KEY);
    lua_setmetatable(L, 1);
    return 1;
}

static int l_frozen(lua_State *L)
{
    return luaL_error(L, "http.json.empty_array is shared and cannot be changed; use "
                         "http.json.array({}) for a list to fill");
}

void mh_json_open(lua_State *L)
{
    lua_newtable(L); /* the marker metatable */
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "__jsonarray");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &ARRAY_MT_KEY);
    lua_pushcfunction(L, mh_json_encode_l);
    lua_setfield(L, -2, "json_encode");
    lua_pushcfunction(L, l_array);
    lua_setfield(L, -2, "json_array");
    /* empty_array: a marked metatable of its own, so that writes to it raise. */
    lua_newtable(L);
    lua_newtable(L);
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "__jsonarray");
    lua_pushcfunction(L, l_frozen);
    lua_setfield(L, -2, "__newindex");
    lua_setmetatable(L, -2);
    lua_setfield(L, -2, "json_empty_array");
}
