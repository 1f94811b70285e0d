#include "lua_json.h"

#include <lauxlib.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
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
 * It starts on the C stack (most answers fit: 100 cached rows are 3.3 kB)
 * and moves to the heap past that, and every piece is written through an
 * inline check of the room left: a call and a capacity check per piece
 * were a fifth of encoding 100 rows (bench/notes/2026-12-06-redis-json.md).
 */
#define STACK_OUT 8192
#define KEY_SLOTS 8 /* a power of 2 */

struct enc {
    lua_State *L;
    char *p;       /* where the next byte goes */
    char *end;     /* the end of the room */
    char *start;   /* stack, or a heap copy once it outgrew it */
    char what[64]; /* "cannot encode a function", ... */
    struct key {
        const void *id; /* the string object (lua_topointer), NULL: empty */
        const char *s;
        size_t len;
    } keys[KEY_SLOTS]; /* put_key's clean keys */
    char stack[STACK_OUT];
};

/* The slow half of room(): a heap buffer at least twice as large. */
static bool grow(struct enc *e, size_t n)
{
    size_t len = (size_t)(e->p - e->start), cap = (size_t)(e->end - e->start), ncap = cap * 2;
    if (n > SIZE_MAX / 4 - len)
        return false;
    while (ncap - len < n)
        ncap *= 2;
    char *d;
    if (e->start == e->stack) {
        d = malloc(ncap);
        if (d)
            memcpy(d, e->start, len);
    } else {
        d = realloc(e->start, ncap);
    }
    if (!d)
        return false;
    e->start = d;
    e->p = d + len;
    e->end = d + ncap;
    return true;
}

/* Room for n more bytes at e->p; false when out of memory. */
static inline bool room(struct enc *e, size_t n)
{
    return (size_t)(e->end - e->p) >= n || grow(e, n);
}

static inline const char *put(struct enc *e, const char *s, size_t n)
{
    if (!room(e, n))
        return err_oom;
    memcpy(e->p, s, n);
    e->p += n;
    return NULL;
}

static inline const char *put_ch(struct enc *e, char c)
{
    if (!room(e, 1))
        return err_oom;
    *e->p++ = c;
    return NULL;
}

/* For each byte: 0 to copy it as it is, else the letter after its '\' ('u': \u00XX). */
static const char ESCAPE[256] = {
    'u',         'u',           'u',          'u', 'u', 'u', 'u', 'u',
    'b',         't',           'n',          'u', 'f', 'r', 'u', 'u', /* 0x00 */
    'u',         'u',           'u',          'u', 'u', 'u', 'u', 'u',
    'u',         'u',           'u',          'u', 'u', 'u', 'u', 'u', /* 0x10 */
    ['"'] = '"', ['\\'] = '\\', [0x7f] = 'u',
};

/* What escaping s adds to its length: 0 for a string copied as it is. */
static size_t escape_extra(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t extra = 0;
    for (size_t i = 0; i < len; i++) {
        char c = ESCAPE[u[i]];
        if (c)
            extra += c == 'u' ? 5 : 1;
    }
    return extra;
}

/*
 * Two passes: the first (escape_extra) counts what escaping adds, so that
 * the room is reserved once and a string with nothing to escape (keys,
 * most values) is one memcpy.
 */
static const char *put_escaped(struct enc *e, const char *s, size_t len, size_t extra)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    if (len > SIZE_MAX / 8 || !room(e, len + extra + 2))
        return err_oom;
    char *p = e->p;
    *p++ = '"';
    if (!extra) {
        memcpy(p, s, len);
        p += len;
    } else {
        for (size_t i = 0; i < len; i++) {
            char c = ESCAPE[u[i]];
            if (!c) {
                *p++ = (char)u[i];
                continue;
            }
            *p++ = '\\';
            *p++ = c;
            if (c == 'u') {
                *p++ = '0';
                *p++ = '0';
                *p++ = hex[u[i] >> 4];
                *p++ = hex[u[i] & 15];
            }
        }
    }
    *p++ = '"';
    e->p = p;
    return NULL;
}

static inline const char *put_string(struct enc *e, const char *s, size_t len)
{
    return put_escaped(e, s, len, escape_extra(s, len));
}

/* "00".."99": an integer's digits are written two at a time. */
static const char DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/*
 * An integer in decimal, without snprintf: ids and counts are most of the
 * numbers a JSON API writes, and snprintf cost ~750 instructions each
 * (bench/notes/2026-12-05-tfb.md: cached queries went from 449k to 300k per
 * request). The digits are counted first and written backwards straight
 * into the output, two per division.
 */
static const char *put_integer(struct enc *e, lua_Integer v)
{
    if (!room(e, 20))
        return err_oom;
    char *p = e->p;
    /* in unsigned arithmetic, so that the most negative value negates */
    unsigned long long u = (unsigned long long)v;
    if (v < 0) {
        *p++ = '-';
        u = 0ULL - u;
    }
    int n = 1;
    unsigned long long t = u;
    for (; t >= 10000; t /= 10000)
        n += 4;
    n += (t >= 10) + (t >= 100) + (t >= 1000);
    char *d = p + n;
    e->p = d;
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        d -= 2;
        memcpy(d, DIGIT_PAIRS + 2 * r, 2);
    }
    if (u >= 10)
        memcpy(d - 2, DIGIT_PAIRS + 2 * u, 2);
    else
        d[-1] = (char)('0' + u);
    return NULL;
}

static const char *put_float(struct enc *e, double d)
{
    if (!isfinite(d))
        return err_number;
    /* The shortest of 15 or 17 digits that reads back as the same double. */
    char num[40];
    int n = snprintf(num, sizeof num, "%.15g", d);
    if (strtod(num, NULL) != d)
        n = snprintf(num, sizeof num, "%.17g", d);
    return put(e, num, (size_t)n);
}

static inline const char *put_number(struct enc *e, int idx)
{
    lua_State *L = e->L;
    if (lua_isinteger(L, idx))
        return put_integer(e, lua_tointeger(L, idx));
    return put_float(e, lua_tonumber(L, idx));
}

/*
 * memcpy for the few bytes of a key, without a call: two copies of fixed
 * size that overlap in the middle.
 */
static inline void copy_short(char *d, const char *s, size_t n)
{
    if (n >= 8 && n <= 16) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else if (n < 4) {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    } else {
        memcpy(d, s, n);
    }
}

/*
 * The key at idx, then ':'. A key string seen before in this call and
 * found to need no escaping is written from memory after one API call
 * (lua_topointer, the string object's address) instead of three and a
 * scan: in a list of rows every row repeats the same few keys. The
 * addresses stay valid for the whole call: the keys belong to tables
 * reachable from the value being encoded, which nothing changes while it
 * runs (raw access only) and which allocates no string, so no key is
 * freed and no other string takes its address. Without remember, the
 * key is neither looked up nor kept. A number key (NULL) is written as a
 * string.
 */
static const char *put_key(struct enc *e, int idx, bool remember)
{
    lua_State *L = e->L;
    const void *id = NULL;
    struct key *m = NULL;
    if (remember) {
        id = lua_topointer(L, idx);
        m = &e->keys[((uintptr_t)id >> 4) & (KEY_SLOTS - 1)];
    }
    if (id && m->id == id) {
        if (!room(e, m->len + 3))
            return err_oom;
        char *p = e->p;
        *p++ = '"';
        copy_short(p, m->s, m->len);
        p += m->len;
        *p++ = '"';
        *p++ = ':';
        e->p = p;
        return NULL;
    }
    int t = lua_type(L, idx);
    const char *err;
    if (t == LUA_TSTRING) {
        size_t len;
        const char *k = lua_tolstring(L, idx, &len);
        size_t extra = escape_extra(k, len);
        err = put_escaped(e, k, len, extra);
        if (!extra && id) {
            m->id = id;
            m->s = k;
            m->len = len;
        }
        return err ? err : put_ch(e, ':');
    }
    if (t != LUA_TNUMBER)
        return err_key;
    err = put_ch(e, '"');
    err = err ? err : put_number(e, idx);
    return err ? err : put(e, "\":", 2);
}

/* Whether the table at idx has a metatable with __jsonarray set. */
static bool marked_array(lua_State *L, int idx)
{
    if (!lua_getmetatable(L, idx))
        return false;
    lua_pushliteral(L, "__jsonarray");
    bool marked = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 2);
    return marked;
}

/* Whether the keys of the table at idx are exactly 1..n, n > 0: cjson's rule for a list. */
static bool keys_are_1_to_n(lua_State *L, int idx, lua_Integer n)
{
    if (n == 0)
        return false;
    lua_Integer count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n) {
            lua_pop(L, 1);
            return false;
        }
        count++;
    }
    return count == n;
}

static const char *put_table(struct enc *e, int idx, int depth);

/* The value at idx, of type t (lua_type), which is the top of the stack. */
static inline const char *put_value(struct enc *e, int idx, int t, int depth)
{
    lua_State *L = e->L;
    switch (t) {
    case LUA_TNUMBER:
        return put_number(e, idx);
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        return put_string(e, s, len);
    }
    case LUA_TTABLE:
        return put_table(e, idx, depth);
    case LUA_TNIL:
        return put(e, "null", 4);
    case LUA_TBOOLEAN:
        return lua_toboolean(L, idx) ? put(e, "true", 4) : put(e, "false", 5);
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == NULL) /* cjson.null */
            return put(e, "null", 4);
        /* fall through */
    default:
        snprintf(e->what, sizeof e->what, "cannot encode a %s", lua_typename(L, t));
        return e->what;
    }
}

/* The table at idx (the top) as a list of its values 1..n. */
static const char *put_array(struct enc *e, int idx, lua_Integer n, int depth)
{
    lua_State *L = e->L;
    const char *err = put_ch(e, '[');
    for (lua_Integer i = 1; i <= n && !err; i++) {
        if (i > 1)
            err = put_ch(e, ',');
        int t = lua_rawgeti(L, idx, i);
        if (!err)
            err = put_value(e, idx + 1, t, depth + 1);
        lua_settop(L, idx);
    }
    return err ? err : put_ch(e, ']');
}

/*
 * The table at idx as an object, its first key and value already pushed
 * by lua_next (at idx + 1 and idx + 2). Keys come in lua_next's order;
 * number keys are written as strings.
 */
static const char *put_object(struct enc *e, int idx, int depth)
{
    lua_State *L = e->L;
    const char *err = put_ch(e, '{');
    while (!err) {
        err = put_key(e, idx + 1, depth > 0); /* the root's keys come once each */
        /* integers first: they are most values, and this asks Lua once less */
        if (!err && lua_isinteger(L, idx + 2))
            err = put_integer(e, lua_tointeger(L, idx + 2));
        else if (!err)
            err = put_value(e, idx + 2, lua_type(L, idx + 2), depth + 1);
        lua_settop(L, idx + 1);
        if (err)
            break;
        if (!lua_next(L, idx))
            return put_ch(e, '}');
        err = put_ch(e, ',');
    }
    lua_settop(L, idx);
    return err;
}

/*
 * The table at idx (the top of the stack). A marked table is a list; else
 * the first key decides for most tables: a string or a float means an
 * object, and its traversal goes on from there. Only a table whose first
 * key is an integer has all its keys checked against 1..n, then is walked
 * again as a list or an object.
 */
static const char *put_table(struct enc *e, int idx, int depth)
{
    lua_State *L = e->L;
    if (depth > MAX_DEPTH)
        return err_depth;
    /*
     * A level holds at most a key and a value on the stack (marked_array
     * two values for a moment): one check covers 16 levels.
     */
    if (depth % 16 == 0 && !lua_checkstack(L, 2 * 16 + 2))
        return err_oom;
    if (marked_array(L, idx))
        return put_array(e, idx, (lua_Integer)lua_rawlen(L, idx), depth);
    lua_pushnil(L);
    if (!lua_next(L, idx))
        return put(e, "{}", 2);
    if (!lua_isinteger(L, idx + 1))
        return put_object(e, idx, depth);
    lua_settop(L, idx);
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    if (keys_are_1_to_n(L, idx, n))
        return put_array(e, idx, n, depth);
    lua_pushnil(L);
    lua_next(L, idx); /* the first key again: the table is not empty */
    return put_object(e, idx, depth);
}

int mh_json_encode_l(lua_State *L)
{
    luaL_checkany(L, 1);
    lua_settop(L, 1);
    struct enc e;
    e.L = L;
    e.p = e.start = e.stack;
    e.end = e.stack + sizeof e.stack;
    for (int i = 0; i < KEY_SLOTS; i++)
        e.keys[i].id = NULL;
    const char *err = put_value(&e, 1, lua_type(L, 1), 0);
    if (err) {
        if (e.start != e.stack)
            free(e.start);
        return luaL_error(L, "json.encode: %s", err); /* formatted (copied) before it unwinds */
    }
    lua_pushlstring(L, e.start, (size_t)(e.p - e.start));
    if (e.start != e.stack)
        free(e.start);
    return 1;
}

/* The most entries json.array(n) makes room for: 2^24 (256 MiB of slots). */
#define ARRAY_ROOM_MAX (1 << 24)

/*
 * json.array([t | n]): marks t, or a new table, to encode as an array;
 * returns it. With a count n, the new table has room for n entries in its
 * list part: filling it does not grow it step by step (8 reallocations
 * and rehashes on the way to 100 entries).
 */
static int l_array(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TNUMBER) {
        lua_Integer n = luaL_checkinteger(L, 1);
        luaL_argcheck(L, n >= 0 && n <= ARRAY_ROOM_MAX, 1, "room for 0..16777216 entries");
        lua_settop(L, 0);
        lua_createtable(L, (int)n, 0);
    } else if (lua_isnoneornil(L, 1)) {
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
